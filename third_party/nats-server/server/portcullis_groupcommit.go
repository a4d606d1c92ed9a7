// Portcullis patch (see PORTCULLIS.md at the module's root): group commit
// of plain publishes on a one-replica file stream under sync always.

package server

import "sync/atomic"

// plainGroup is a run of consecutive plain messages that the stream's
// internal loop popped from its inbound queue together. They are stored
// without a sync each and synced once when the run ends (FlushAllPending),
// as an atomic batch's messages are (coalesceSync in
// processJetStreamAtomicBatchMsg). Their acknowledgements wait in the
// stream's outq, which only the internal loop sends, so none leaves before
// the sync; if the sync fails they are dropped (the publishers time out and
// learn nothing, never a false success) and the stream takes the write
// error. isolateMu is held for the whole run, so direct and message gets
// never read a message before its sync. A consumer may load a message of
// the run before the sync, but its delivery waits in the same outq, so it
// too leaves only after the sync (after a failed sync it still leaves:
// dropAcks keeps everything but the run's acknowledgements).
type plainGroup struct {
	mset    *stream
	fs      *fileStore
	replies map[string]struct{}
	msgs    int
}

// Group commit counters, for tests: runs synced once, and their messages.
var groupCommits, groupCommitMsgs atomic.Uint64

// groupSyncHook, set by tests only, runs in the stream's loop just before a
// run's sync, with the stream and the number of messages in the run.
var groupSyncHook atomic.Pointer[func(mset *stream, msgs int)]

// PlainGroupCommits reports how many runs of plain messages were synced
// once, and how many messages they held.
func PlainGroupCommits() (groups, msgs uint64) {
	return groupCommits.Load(), groupCommitMsgs.Load()
}

// isPlainInbound reports whether im is neither part of a fast batch nor of
// an atomic batch (the internal loop's own tests, in its order).
func isPlainInbound(im *inMsg) bool {
	if batch, err := getFastBatch(im.rply, im.hdr); batch != nil || err {
		batch.returnToPool()
		return false
	}
	return getBatchId(im.hdr) == _EMPTY_
}

// beginPlainGroup starts a run, or returns nil where there is nothing to
// gain: not a file store, or not syncing every write.
func (mset *stream) beginPlainGroup() *plainGroup {
	fs, ok := mset.store.(*fileStore)
	if !ok {
		return nil
	}
	mset.isolateMu.Lock()
	fs.mu.Lock()
	if !fs.syncAlways.Load() {
		fs.mu.Unlock()
		mset.isolateMu.Unlock()
		return nil
	}
	fs.beginGroupLocked()
	fs.mu.Unlock()
	return &plainGroup{mset: mset, fs: fs, replies: make(map[string]struct{})}
}

// add notes one message of the run, by the subject its acknowledgement
// goes to. A nil group (no run) ignores it.
func (g *plainGroup) add(reply string) {
	if g == nil {
		return
	}
	g.msgs++
	if reply != _EMPTY_ {
		g.replies[reply] = struct{}{}
	}
}

// commit syncs the run and ends it. It returns nil, so the caller writes
// group = group.commit(); a nil group does nothing.
func (g *plainGroup) commit() *plainGroup {
	if g == nil {
		return nil
	}
	mset, fs := g.mset, g.fs
	if h := groupSyncHook.Load(); h != nil {
		(*h)(mset, g.msgs)
	}
	err := fs.FlushAllPending()
	fs.mu.Lock()
	fs.endGroupLocked()
	fs.mu.Unlock()
	if err != nil {
		mset.setWriteErr(err)
		mset.mu.RLock()
		outq := mset.outq
		mset.mu.RUnlock()
		dropAcks(outq, g.replies)
	} else {
		groupCommits.Add(1)
		groupCommitMsgs.Add(uint64(g.msgs))
	}
	mset.isolateMu.Unlock()
	return nil
}

// dropAcks removes from q every message to one of replies and queues the
// rest again. Only the stream's internal loop sends q, and it is the caller,
// so nothing else takes from q meanwhile; a message another goroutine queues
// meanwhile (a consumer's delivery) may go out before those queued again,
// which only happens on a failed sync, after which the stream takes no
// writes.
func dropAcks(q *jsOutQ, replies map[string]struct{}) {
	pms := q.pop()
	for _, pm := range pms {
		if _, ok := replies[pm.dsubj]; ok {
			pm.returnToPool()
			continue
		}
		q.send(pm)
	}
	q.recycle(&pms)
}

// beginGroupLocked switches the store for a group of writes synced once
// (a plain group, or an atomic batch's coalesced commit): no sync per write
// (sync on flush, as upstream does for a batch), and its writes held in their
// block's write cache, unwritten, until the group's sync (FlushAllPending,
// syncBlocks) writes each block's pending bytes with one system call and
// syncs them. Without the hold a store that flushes in place writes every
// message with a system call of its own, in the stream's one loop. Readers
// find a held message in the write cache, as one waiting for an asynchronous
// flush. fs.mu held.
func (fs *fileStore) beginGroupLocked() {
	fs.updateDurabilitySettingsLocked(true)
	fs.heldWrites = true
}

// endGroupLocked switches the store back after a group's sync (or its
// failure): a sync and a write per message again. fs.mu held.
func (fs *fileStore) endGroupLocked() {
	fs.resetDurabilitySettingsLocked()
	fs.heldWrites = false
}
