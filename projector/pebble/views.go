// Package pebble keeps the ledger's views in Pebble: the head of every
// subject (the latest event on an intent or an execution) and, per stream,
// the last applied stream sequence, written in the same batch as the rows
// it covers. The views are rebuildable from the streams at any time.
package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// Key layout. Heads sort by subject, so the executions of one stream sort
// by id, and ids are ULIDs: a reverse scan lists newest first.
var (
	headPrefix       = []byte("h/") // execution subject → 8-byte seq + stored event without its signature (headRow)
	intentPrefix     = []byte("i/") // intent token → 8-byte seq of its latest event + latest execution subject
	execIDPrefix     = []byte("x/") // execution id → execution subject
	checkpointPrefix = []byte("c/") // stream → 8-byte last applied sequence
	digestPrefix     = []byte("g/") // stream → running digest up to the checkpoint
	// 8-byte dispatch deadline (Unix ns, big-endian) + execution id → "",
	// only while the execution is DISPATCHED, in deadline order: the
	// deadline sweep scans the overdue prefix of it. (Under "d/" before
	// index version 1, index.go.)
	dispatchedPrefix = []byte("dl/")
	quarantinePrefix = []byte("q/") // stream "/" 8-byte seq → pb.Quarantined
	// JSON {state number: executions}: how many heads hold an execution in
	// each state, kept in the batch of the heads it counts.
	statesKey = []byte("n/states")
)

// blockCacheBytes is the Pebble block cache of one gateway's views.
const blockCacheBytes = 64 << 20

// memTableBytes is the views' memtable (Pebble's default is 4 MiB). Rows
// are keyed by random tokens, so every L0 compaction rewrites all of the
// base level it overlaps: four times larger flushes cut that rewriting
// (the largest CPU cost of the views, ~20 us per Begin at 64 callers) to
// about a third, for up to two memtables of memory.
const memTableBytes = 16 << 20

// l0Sublevels is how many sublevels L0 gathers before Pebble compacts it
// into the base level (Pebble's default is 4). Every flush of random keys
// overlaps the whole base level, so each L0 compaction rewrites all of it:
// gathering twice the flushes per rewrite cut the bytes compacted by about
// 37% over a 300k-execution load and about 30% over a 1M one, and the CPU
// per Begin of those loads by 6–19% (BENCHMARKS.md, "the views'
// compactions in a long load"). A point read may look into as many L0
// files (more while a compaction is behind), each behind its bloom filter.
// Writes stall at three times as many, as with the default.
const l0Sublevels = 8

// Views is a ledger.Views and a projector.Store on one Pebble database.
// It also tells waiters when the executions stream's checkpoint passes a
// sequence, which is how a gateway catches up after a conflict.
type Views struct {
	db *pebble.DB

	mu      sync.Mutex
	applied map[string]uint64 // checkpoint per stream
	waiters []chan struct{}

	quarantined atomic.Uint64 // rows in the quarantine view

	// statesMu orders the batches that move states (one per lane
	// projector) from reading the counts to committing them.
	statesMu sync.Mutex
	states   map[pb.State]int64 // executions by state, as committed

	heads   *headCache   // the heads Write wrote last, decoded
	intents *intentCache // the intent rows Write wrote last

	present  *rowFilter    // every intent and head row the views may hold
	scanStop atomic.Bool   // Close asks scanRows to stop
	scanDone chan struct{} // scanRows returned

	// behind hears a wait for a stream sequence the views do not hold yet
	// (set before use; nil: none), so the stream's reader can fetch it.
	behind func(stream string, seq uint64)

	// budgetAt reads a budget event back from its stream, verified (set
	// before use by ReadBudgetFrom; nil: decision lists cannot be read).
	budgetAt func(ctx context.Context, seq uint64) (*pb.Event, error)
}

// OnBehind makes fn hear every wait for a sequence of a stream the views
// do not hold yet (a projector's source reads the stream at once instead
// of when it next looks). It must not block. Call it before the views are
// read.
func (v *Views) OnBehind(fn func(stream string, seq uint64)) { v.behind = fn }

// ReadBudgetFrom gives the decision lists their events: at reads the budget
// stream's event at a sequence and verifies it, as the ledger's reads do
// (jetstream.Log.At). The views keep only each decision's sequence and
// hash; a page of a list reads its events back from the stream. Call it
// before the views are read.
func (v *Views) ReadBudgetFrom(at func(ctx context.Context, seq uint64) (*pb.Event, error)) {
	v.budgetAt = at
}

var (
	_ ledger.Views    = (*Views)(nil)
	_ projector.Store = (*Views)(nil)
)

// Open opens (or creates) the views in dir.
func Open(dir string) (*Views, error) {
	opts := &pebble.Options{Logger: quietLogger{}, Cache: pebble.NewCache(blockCacheBytes), MemTableSize: memTableBytes,
		L0CompactionThreshold: l0Sublevels, L0StopWritesThreshold: 3 * l0Sublevels}
	defer opts.Cache.Unref()
	// Most Begins look up an intent that does not exist yet: bloom filters
	// answer those without reading data blocks.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open views %s: %w", dir, err)
	}
	v := &Views{db: db, applied: map[string]uint64{}, heads: newHeadCache(), intents: newIntentCache(),
		present: newRowFilter(rowFilterFirstCap), scanDone: make(chan struct{})}
	for _, stream := range []string{ledger.ExecutionsStream, keeper.Stream} {
		cp, err := v.Checkpoint(stream)
		if err != nil {
			db.Close()
			return nil, err
		}
		v.applied[stream] = cp
	}
	n, err := v.countQuarantined()
	if err != nil {
		db.Close()
		return nil, err
	}
	v.quarantined.Store(n)
	if err := v.loadStates(); err != nil {
		db.Close()
		return nil, err
	}
	if err := v.migrateIndexes(); err != nil {
		db.Close()
		return nil, fmt.Errorf("views %s: index migration: %w", dir, err)
	}
	go v.scanRows(v.present)
	return v, nil
}

// Close flushes and closes the database.
func (v *Views) Close() error {
	v.scanStop.Store(true)
	<-v.scanDone
	return v.db.Close()
}

// Checkpoint returns the last applied sequence of stream (0 when none).
func (v *Views) Checkpoint(stream string) (uint64, error) {
	return checkpoint(v.db, stream)
}

func checkpoint(r pebble.Reader, stream string) (uint64, error) {
	val, closer, err := r.Get(key(checkpointPrefix, stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(val) != 8 {
		return 0, fmt.Errorf("checkpoint %s: %d bytes", stream, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// Write stores heads, intents and the checkpoint in one batch. It does not
// fsync: the views are rebuilt from the stream, which is the durable
// record, and the checkpoint written in the same batch keeps rows and
// checkpoint consistent after a crash.
func (v *Views) Write(stream string, heads []projector.Row, intents map[string]projector.Intent, quarantined []*pb.Quarantined, mark projector.Mark) error {
	b := v.db.NewBatch()
	defer b.Close()
	v.statesMu.Lock()
	defer v.statesMu.Unlock()
	states, err := v.moveStates(b, heads)
	if err != nil {
		return err
	}
	if err := setQuarantined(b, quarantined); err != nil {
		return err
	}
	for _, r := range heads {
		val, err := headRow(r.Seq, r.Data)
		if err != nil {
			return fmt.Errorf("view head %s: %w", r.Subject, err)
		}
		k := key(headPrefix, r.Subject)
		v.present.add(k) // before the row can be read: never a wrong "absent"
		if err := b.Set(k, val, nil); err != nil {
			return err
		}
		if r.Accepted {
			op := b.SetDeferred(len(execIDPrefix)+len(r.Event.GetExecutionId()), len(r.Subject))
			copy(op.Key[copy(op.Key, execIDPrefix):], r.Event.GetExecutionId())
			copy(op.Value, r.Subject)
			if err := op.Finish(); err != nil {
				return err
			}
		}
		if err := setDispatched(b, r); err != nil {
			return err
		}
		if err := v.setKeyed(b, r); err != nil {
			return err
		}
		if err := setIndexes(b, r); err != nil {
			return err
		}
	}
	for token, in := range intents {
		k := key(intentPrefix, token)
		v.present.add(k) // before the row can be read, as for the heads
		if err := setSeqRow(b, k, in.Seq, in.LatestSubject); err != nil {
			return err
		}
	}
	if err := setMark(b, stream, mark); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	// The rows' events are the views' now: unsigned, they are what Head
	// would decode from the rows just committed.
	for _, r := range heads {
		ledger.Unsign(r.Event)
		v.heads.put(r.Subject, ledger.Head{Seq: r.Seq, Event: r.Event}, len(r.Data))
	}
	for token, in := range intents {
		v.intents.put(token, in, len(token)+8+len(in.LatestSubject))
	}
	if states != nil {
		v.states = states
	}
	v.quarantined.Add(uint64(len(quarantined)))
	v.setApplied(stream, mark.Seq)
	return nil
}

// setSeqRow sets k to an 8-byte big-endian seq followed by data, written
// straight into the batch.
func setSeqRow(b *pebble.Batch, k []byte, seq uint64, data string) error {
	op := b.SetDeferred(len(k), 8+len(data))
	copy(op.Key, k)
	binary.BigEndian.PutUint64(op.Value, seq)
	copy(op.Value[8:], data)
	return op.Finish()
}

// setDispatched keeps the dispatched index: the row keyed on the replaced
// head's deadline goes, and one keyed on the new deadline comes while the
// execution is DISPATCHED.
func setDispatched(b *pebble.Batch, r projector.Row) error {
	if old := r.Replaced.GetExecutionChanged().GetExecution(); old.GetState() == pb.State_STATE_DISPATCHED && old.GetDispatchDeadline() != nil {
		if err := b.Delete(dispatchedKey(old), nil); err != nil {
			return err
		}
	}
	if x := r.Event.GetExecutionChanged().GetExecution(); x.GetState() == pb.State_STATE_DISPATCHED && x.GetDispatchDeadline() != nil {
		return b.Set(dispatchedKey(x), nil, nil)
	}
	return nil
}

func dispatchedKey(x *pb.Execution) []byte {
	k := binary.BigEndian.AppendUint64(append([]byte(nil), dispatchedPrefix...), uint64(x.GetDispatchDeadline().AsTime().UnixNano()))
	return append(k, x.GetExecutionId()...)
}

// Overdue lists DISPATCHED executions whose deadline is at or before now
// (at most max, earliest deadline first). The index is in deadline order,
// so only overdue rows are read.
func (v *Views) Overdue(_ context.Context, now time.Time, max int) ([]string, error) {
	upper := binary.BigEndian.AppendUint64(append([]byte(nil), dispatchedPrefix...), uint64(now.UnixNano())+1)
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: dispatchedPrefix, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok && len(out) < max; ok = it.Next() {
		k := it.Key()
		if len(k) < len(dispatchedPrefix)+8 {
			return nil, fmt.Errorf("view dispatched %q: %w: short key", k, ledger.ErrCorrupt)
		}
		out = append(out, string(k[len(dispatchedPrefix)+8:]))
	}
	return out, it.Error()
}

// setMark writes the checkpoint (8-byte sequence) and, beside it, the
// running digest in the batch of the rows they cover.
func setMark(b *pebble.Batch, stream string, mark projector.Mark) error {
	var cp [8]byte
	binary.BigEndian.PutUint64(cp[:], mark.Seq)
	if err := b.Set(key(checkpointPrefix, stream), cp[:], nil); err != nil {
		return err
	}
	return b.Set(key(digestPrefix, stream), mark.Digest, nil)
}

// Mark returns the checkpoint of stream with its running digest, both read
// from one snapshot: the sealer signs the pair, and a Write landing between
// two reads would pair a sequence with a later digest.
func (v *Views) Mark(stream string) (projector.Mark, error) {
	snap := v.db.NewSnapshot()
	defer snap.Close()
	seq, err := checkpoint(snap, stream)
	if err != nil || seq == 0 {
		return projector.Mark{}, err
	}
	val, closer, err := snap.Get(key(digestPrefix, stream))
	if err != nil {
		return projector.Mark{}, fmt.Errorf("digest of %s: %w", stream, err)
	}
	defer closer.Close()
	return projector.Mark{Seq: seq, Digest: bytes.Clone(val)}, nil
}

// WaitFor blocks until the executions views hold every event up to seq.
func (v *Views) WaitFor(ctx context.Context, seq uint64) error {
	return v.waitFor(ctx, ledger.ExecutionsStream, seq)
}

// BudgetWaitFor blocks until the budget views hold every event up to seq.
func (v *Views) BudgetWaitFor(ctx context.Context, seq uint64) error {
	return v.waitFor(ctx, keeper.Stream, seq)
}

// StreamWaitFor blocks until the views hold every event of stream up to seq.
func (v *Views) StreamWaitFor(ctx context.Context, stream string, seq uint64) error {
	return v.waitFor(ctx, stream, seq)
}

func (v *Views) waitFor(ctx context.Context, stream string, seq uint64) error {
	v.mu.Lock()
	_, known := v.applied[stream]
	v.mu.Unlock()
	if !known { // a stream Open did not load (the sessions journal's digest)
		cp, err := v.Checkpoint(stream)
		if err != nil {
			return err
		}
		v.mu.Lock()
		if v.applied[stream] < cp {
			v.applied[stream] = cp
		}
		v.mu.Unlock()
	}
	for told := false; ; told = true {
		v.mu.Lock()
		if v.applied[stream] >= seq {
			v.mu.Unlock()
			return nil
		}
		ch := make(chan struct{})
		v.waiters = append(v.waiters, ch)
		v.mu.Unlock()
		if !told && v.behind != nil {
			v.behind(stream, seq)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (v *Views) setApplied(stream string, seq uint64) {
	v.mu.Lock()
	v.applied[stream] = seq
	ws := v.waiters
	v.waiters = nil
	v.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

// get reads the value of k (pebble.ErrNotFound when there is none)
// through every level's bloom filter. DB.Get skips the filters of the
// bottom level (L6), where most rows live once the views outgrow their
// memtables, so a key that does not exist yet (the intent of a new Begin,
// the head of a new execution: most decisions look one up) cost a read of
// an L6 index and data block, a block-cache miss and a pread once the views
// outgrow the cache, growing with the executions indexed. The filters of a
// million keys take about 1.2 MB of cache.
func (v *Views) get(k []byte) ([]byte, io.Closer, error) {
	it, err := v.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return nil, nil, err
	}
	if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
		err := it.Close()
		if err == nil {
			err = pebble.ErrNotFound
		}
		return nil, nil, err
	}
	val, err := it.ValueAndErr()
	if err != nil {
		it.Close()
		return nil, nil, err
	}
	return val, it, nil
}

// IntentRow returns an intent's row.
func (v *Views) IntentRow(token string) (projector.Intent, error) {
	if in, ok := v.intents.get(token); ok {
		return in, nil
	}
	k := key(intentPrefix, token)
	if v.present.absent(k) {
		return projector.Intent{}, ledger.ErrNotFound
	}
	val, closer, err := v.get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return projector.Intent{}, ledger.ErrNotFound
	}
	if err != nil {
		return projector.Intent{}, fmt.Errorf("view intent %s: %w", token, err)
	}
	defer closer.Close()
	if len(val) < 8 {
		return projector.Intent{}, fmt.Errorf("view intent %s: %w: short row", token, ledger.ErrCorrupt)
	}
	return projector.Intent{Seq: binary.BigEndian.Uint64(val), LatestSubject: string(val[8:])}, nil
}

// Intent returns what the views hold of an intent, with the head of its
// latest execution.
func (v *Views) Intent(ctx context.Context, token string) (ledger.IntentHead, error) {
	in, err := v.IntentRow(token)
	if err != nil {
		return ledger.IntentHead{}, err
	}
	if in.LatestSubject == "" {
		// Only quarantined messages so far: no execution, but the intent
		// filter's real last sequence for the create's compare-and-set.
		return ledger.IntentHead{Seq: in.Seq}, nil
	}
	h, err := v.Head(ctx, in.LatestSubject)
	if err != nil {
		return ledger.IntentHead{}, err
	}
	return ledger.IntentHead{Seq: in.Seq, Latest: h}, nil
}

// ExecutionSubject finds an execution's subject by id.
func (v *Views) ExecutionSubject(_ context.Context, id string) (string, error) {
	val, closer, err := v.get(key(execIDPrefix, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", ledger.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("view execution %s: %w", id, err)
	}
	defer closer.Close()
	return string(val), nil
}

// Head returns the latest folded event on subject. The event may be
// shared with other readers: it must not be changed.
func (v *Views) Head(_ context.Context, subject string) (ledger.Head, error) {
	if h, ok := v.heads.get(subject); ok {
		return h, nil
	}
	return v.storedHead(subject)
}

// storedHead reads and decodes subject's head row: an event of the
// caller's own.
func (v *Views) storedHead(subject string) (ledger.Head, error) {
	k := key(headPrefix, subject)
	if v.present.absent(k) {
		return ledger.Head{}, ledger.ErrNotFound
	}
	val, closer, err := v.get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return ledger.Head{}, ledger.ErrNotFound
	}
	if err != nil {
		return ledger.Head{}, fmt.Errorf("view head %s: %w", subject, err)
	}
	defer closer.Close()
	return decodeHead(subject, val)
}

// headRow is a head's value: the 8-byte sequence and the stored event
// without the fields outside its hash (signature, group_path, group_index,
// group_size: fields 9–12), byte for byte otherwise. The projector checked
// the signature before folding the event, and nothing reads it from the
// views: a decision chains to the head's hash and copies its execution,
// and reads of the log (Log.Last, audit) verify what the log holds. The
// group's audit path is most of a stored event's bytes (32 bytes a level:
// a commit group of 256 events has 8), and every byte of a head is
// rewritten at each level Pebble compacts it into. Rows written before
// keep those fields; decodeHead reads both.
func headRow(seq uint64, data []byte) ([]byte, error) {
	return ledger.AppendUnsigned(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), seq), data)
}

func decodeHead(subject string, val []byte) (ledger.Head, error) {
	if len(val) < 8 {
		return ledger.Head{}, fmt.Errorf("view head %s: %w: short row", subject, ledger.ErrCorrupt)
	}
	ev := new(pb.Event)
	if err := proto.Unmarshal(val[8:], ev); err != nil {
		return ledger.Head{}, fmt.Errorf("view head %s: %w: %v", subject, ledger.ErrCorrupt, err)
	}
	return ledger.Head{Seq: binary.BigEndian.Uint64(val), Event: ev}, nil
}

// ListExecutions lists executions by id (ULIDs: time order), newest first:
// from the state index when q names a state, else from the tool index when
// it names a tool, else from every id (index.go). A page reads about as
// many heads as it returns (with both a state and a tool, the state's).
func (v *Views) ListExecutions(ctx context.Context, q ledger.ListQuery) ([]*pb.Execution, string, error) {
	prefix := listPrefix(q)
	upper := prefixEnd(prefix)
	if q.PageToken != "" {
		upper = key(prefix, q.PageToken)
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return nil, "", err
	}
	defer it.Close()
	var out []*pb.Execution
	for ok := it.Last(); ok; ok = it.Prev() {
		subject := string(it.Value())
		if !bytes.Equal(prefix, execIDPrefix) { // an index row: the id is in the key
			if subject, err = v.ExecutionSubject(ctx, string(it.Key()[len(prefix):])); err != nil {
				return nil, "", err
			}
		}
		h, err := v.storedHead(subject) // not the cache's: x is changed below
		if err != nil {
			return nil, "", err
		}
		x := h.Event.GetExecutionChanged().GetExecution()
		if (q.State != pb.State_STATE_UNSPECIFIED && x.GetState() != q.State) || (q.Tool != "" && x.GetTool() != q.Tool) {
			continue
		}
		x.StreamSeq = h.Seq
		out = append(out, x)
		if len(out) == q.PageSize {
			if it.Prev() {
				return out, x.GetExecutionId(), it.Error()
			}
			break
		}
	}
	return out, "", it.Error()
}

// Dump returns every key and value, for comparing views built two ways.
func (v *Views) Dump() (map[string][]byte, error) {
	it, err := v.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make(map[string][]byte)
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = bytes.Clone(it.Value())
	}
	return out, it.Error()
}

func key(prefix []byte, name string) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(name)), prefix...), name...)
}

func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	end[len(end)-1]++
	return end
}

// quietLogger keeps Pebble's informational chatter off stdout; fatal
// conditions still stop the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", a...)
}
func (quietLogger) Fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", a...)
	os.Exit(1)
}
