// Portcullis patch tests (see PORTCULLIS.md at the module's root).

package server

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// groupTestStream runs a server with sync always and a one-replica file
// stream whose acknowledgements go to a queue the test reads (the stream's
// internal loop keeps sending the queue it started with), so a group's
// acknowledgements can be looked at before anything sends them.
func groupTestStream(t *testing.T) (*stream, *fileStore, *jsOutQ) {
	t.Helper()
	s := portcullisTestServer(t, t.TempDir())
	mset, err := s.GlobalAccount().addStream(&StreamConfig{Name: "G", Subjects: []string{"g.>"}, Storage: FileStorage, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, ok := mset.store.(*fileStore)
	if !ok {
		t.Fatal("not a file store")
	}
	// The internal loop takes the stream's queue when it starts: once it
	// has sent a message from it, it runs with that queue, and a queue
	// put in its place is the test's alone.
	mset.mu.RLock()
	orig := mset.outq
	mset.mu.RUnlock()
	orig.sendMsg("portcullis.test.ready", nil)
	for deadline := time.Now().Add(10 * time.Second); orig.len() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream's internal loop never sent its queue")
		}
	}
	q := &jsOutQ{newIPQueue[*jsPubMsg](s, "portcullis group test")}
	mset.mu.Lock()
	mset.outq = q
	mset.mu.Unlock()
	return mset, fs, q
}

// queued pops what q holds, by the subject each message goes to.
func queued(q *jsOutQ) map[string]int {
	got := map[string]int{}
	pms := q.pop()
	for _, pm := range pms {
		got[pm.dsubj]++
	}
	q.recycle(&pms)
	return got
}

func TestPortcullisGroupSyncsOnceThenAcks(t *testing.T) {
	mset, fs, q := groupTestStream(t)
	groups, msgs := PlainGroupCommits()

	g := mset.beginPlainGroup()
	if g == nil {
		t.Fatal("no group on a sync-always file stream")
	}
	if fs.syncAlways.Load() || !fs.syncOnFlush.Load() {
		t.Fatal("inside a group the store still syncs every write")
	}
	if mset.isolateMu.TryRLock() {
		t.Fatal("a direct get could read the group's messages before their sync")
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		g.add(r)
		if err := mset.processJetStreamMsg("g."+r, r, nil, []byte("x"), 0, 0, nil, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if g.commit() != nil {
		t.Fatal("commit returned the group")
	}
	if !fs.syncAlways.Load() || fs.syncOnFlush.Load() {
		t.Fatal("after the group the store does not sync every write again")
	}
	if !mset.isolateMu.TryLock() {
		t.Fatal("the group kept the stream's isolation lock")
	}
	mset.isolateMu.Unlock()
	if got := queued(q); got["r1"] != 1 || got["r2"] != 1 || got["r3"] != 1 {
		t.Fatalf("acknowledgements after the sync: %v", got)
	}
	if g2, m2 := PlainGroupCommits(); g2 != groups+1 || m2 != msgs+3 {
		t.Fatalf("counters: %d groups, %d messages; want %d, %d", g2, m2, groups+1, msgs+3)
	}
	if st := mset.state(); st.Msgs != 3 || st.LastSeq != 3 {
		t.Fatalf("stream state %+v", st)
	}
}

func TestPortcullisGroupFailedSyncSendsNoAck(t *testing.T) {
	mset, fs, q := groupTestStream(t)
	q.sendMsg("other", []byte("queued before the group")) // not the group's: kept
	g := mset.beginPlainGroup()
	for _, r := range []string{"r1", "r2"} {
		g.add(r)
		if err := mset.processJetStreamMsg("g."+r, r, nil, []byte("x"), 0, 0, nil, false, false); err != nil {
			t.Fatal(err)
		}
	}
	injected := errors.New("injected sync failure")
	fs.mu.Lock()
	fs.werr = injected
	fs.mu.Unlock()
	g.commit()
	got := queued(q)
	if got["r1"] != 0 || got["r2"] != 0 {
		t.Fatalf("a failed sync acknowledged its messages: %v", got)
	}
	if got["other"] != 1 {
		t.Fatalf("a message that was not the group's was dropped: %v", got)
	}
	if err := mset.getWriteErr(); !errors.Is(err, injected) {
		t.Fatalf("the stream's write error after a failed sync: %v", err)
	}
	if !mset.isolateMu.TryLock() {
		t.Fatal("the failed group kept the stream's isolation lock")
	}
	mset.isolateMu.Unlock()
}

func TestPortcullisNoGroupWithoutSyncAlways(t *testing.T) {
	mset, fs, _ := groupTestStream(t)
	fs.mu.Lock()
	fs.updateDurabilitySettingsLocked(true) // as a raft-backed stream: sync on flush
	fs.mu.Unlock()
	if g := mset.beginPlainGroup(); g != nil {
		t.Fatal("a group on a stream that does not sync every write")
	}
	if !mset.isolateMu.TryLock() {
		t.Fatal("refusing a group kept the stream's isolation lock")
	}
	mset.isolateMu.Unlock()
}

func TestPortcullisPlainInbound(t *testing.T) {
	for _, c := range []struct {
		name  string
		im    *inMsg
		plain bool
	}{
		{"plain", &inMsg{subj: "g.a", rply: "_INBOX.x"}, true},
		{"atomic batch", &inMsg{subj: "g.a", rply: "_INBOX.x", hdr: genHeader(nil, JSBatchId, "b1")}, false},
	} {
		if got := isPlainInbound(c.im); got != c.plain {
			t.Errorf("%s: plain %v, want %v", c.name, got, c.plain)
		}
	}
}

// portcullisTestServer runs a server with JetStream in dir, syncing every
// write (Portcullis's setting), stopped when the test ends (stopping it
// earlier is allowed: Shutdown is idempotent).
func portcullisTestServer(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := NewServer(&Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, SyncAlways: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return s
}

// writeSyscalls is this process's count of write system calls so far
// (syscw in /proc/self/io); the test skips where there is none.
func writeSyscalls(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no write system call count here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}

// The messages of a group, plain or atomic, wait in their block's write
// cache for the group's sync, which writes them with one system call: a
// stream's loop no longer makes one write system call per message. Stored
// one by one (no group), each message is still written and synced on its own.
func TestPortcullisGroupWritesOnceAtItsSync(t *testing.T) {
	const n = 100
	dir := t.TempDir()
	s := portcullisTestServer(t, dir)
	mset, err := s.GlobalAccount().addStream(&StreamConfig{Name: "W", Subjects: []string{"w.>"}, Storage: FileStorage, Replicas: 1, AllowAtomicPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := mset.store.(*fileStore)
	msg := make([]byte, 512)
	writes := func(name string, store func()) uint64 {
		t.Helper()
		before := mset.state().LastSeq
		w := writeSyscalls(t)
		store()
		got := writeSyscalls(t) - w
		if st := mset.state(); st.LastSeq != before+n {
			t.Fatalf("%s: stored up to %d, want %d", name, st.LastSeq, before+n)
		}
		fs.mu.RLock()
		held, lmb := fs.heldWrites, fs.lmb
		fs.mu.RUnlock()
		if held {
			t.Fatalf("%s: the store still holds its writes after the sync", name)
		}
		if p := lmb.pendingWriteSize(); p != 0 {
			t.Fatalf("%s: %d bytes still unwritten after the sync", name, p)
		}
		return got
	}

	alone := writes("one by one", func() {
		for i := range n {
			if err := mset.processJetStreamMsg(fmt.Sprintf("w.a.%d", i), _EMPTY_, nil, msg, 0, 0, nil, false, true); err != nil {
				t.Fatal(err)
			}
		}
	})
	if alone < n {
		t.Fatalf("%d messages stored one by one took %d write system calls: the count does not see them", n, alone)
	}
	plain := writes("plain group", func() {
		g := mset.beginPlainGroup()
		for i := range n {
			g.add(_EMPTY_)
			if err := mset.processJetStreamMsg(fmt.Sprintf("w.p.%d", i), _EMPTY_, nil, msg, 0, 0, nil, false, false); err != nil {
				t.Fatal(err)
			}
		}
		g.commit()
	})
	atomic := writes("atomic batch", func() {
		for i := 1; i <= n; i++ {
			hdr := genHeader(nil, JSBatchId, "w")
			hdr = genHeader(hdr, JSBatchSeq, strconv.Itoa(i))
			if i == n {
				hdr = genHeader(hdr, JSBatchCommit, "1")
			}
			if err := mset.processJetStreamAtomicBatchMsg("w", fmt.Sprintf("w.b.%d", i), _EMPTY_, hdr, msg, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("write system calls for %d messages: one by one %d, plain group %d, atomic batch %d", n, alone, plain, atomic)
	// A few writes besides the messages' (the stream's index, another
	// goroutine of the server) are allowed, never one per message.
	for name, got := range map[string]uint64{"plain group": plain, "atomic batch": atomic} {
		if got > n/4 {
			t.Errorf("%s of %d messages: %d write system calls (one by one: %d)", name, n, got, alone)
		}
	}

	// What the groups stored is on disk: a restart reads it back.
	s.Shutdown()
	s.WaitForShutdown()
	s = portcullisTestServer(t, dir)
	if mset, err = s.GlobalAccount().lookupStream("W"); err != nil {
		t.Fatal(err)
	}
	if st := mset.state(); st.Msgs != 3*n {
		t.Fatalf("after a restart the stream holds %d messages, want %d", st.Msgs, 3*n)
	}
	for _, subj := range []string{"w.p.99", "w.b.100"} {
		sm, err := mset.store.LoadLastMsg(subj, nil)
		if err != nil || len(sm.msg) != len(msg) {
			t.Fatalf("after a restart %s: %v", subj, err)
		}
	}
}

// A consumer's deliveries wait in the stream's outq, which only the stream's
// loop sends, and the loop syncs a run of plain messages before it sends
// anything again: a consumer may load a message of a run before the run's
// sync (the store holds it), but nobody receives it before that sync. The
// test holds the loop just before the first run's sync (groupSyncHook) and
// watches a push consumer's deliveries meanwhile.
func TestPortcullisConsumersGetARunOnlyAfterItsSync(t *testing.T) {
	s := portcullisTestServer(t, t.TempDir())
	mset, err := s.GlobalAccount().addStream(&StreamConfig{Name: "C", Subjects: []string{"c.>"}, Storage: FileStorage, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deliveries := make(chan uint64, 4096)
	if _, err := nc.Subscribe("deliver.c", func(m *nats.Msg) {
		// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
		toks := strings.Split(m.Reply, ".")
		if len(toks) < 9 {
			t.Errorf("delivery without its metadata: reply %q", m.Reply)
			return
		}
		seq, err := strconv.ParseUint(toks[5], 10, 64)
		if err != nil {
			t.Errorf("reply %q: %v", m.Reply, err)
			return
		}
		deliveries <- seq
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := mset.addConsumer(&ConsumerConfig{Durable: "watch", DeliverSubject: "deliver.c", AckPolicy: AckNone, DeliverPolicy: DeliverAll}); err != nil {
		t.Fatal(err)
	}

	type run struct{ first, last uint64 }
	entered, release := make(chan run, 1), make(chan struct{})
	var once sync.Once
	hook := func(mset *stream, msgs int) {
		if mset.name() != "C" {
			return // another test's stream (none runs in parallel today)
		}
		once.Do(func() {
			last := mset.lastSeq()
			entered <- run{last - uint64(msgs) + 1, last}
			<-release
		})
	}
	groupSyncHook.Store(&hook)
	released := false
	defer func() {
		groupSyncHook.Store(nil)
		if !released {
			close(release)
		}
	}()

	const n = 500
	for i := range n {
		if err := nc.Publish(fmt.Sprintf("c.%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var r run
	select {
	case r = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no run of plain messages formed")
	}
	if r.last <= r.first {
		t.Fatalf("a run of %d–%d", r.first, r.last)
	}
	// The loop waits before the run's sync: the consumer has been told of
	// the run's messages (signalConsumers runs apart) and may have loaded
	// them, but none may arrive.
	hold := time.After(300 * time.Millisecond)
	seen := map[uint64]bool{}
holding:
	for {
		select {
		case seq := <-deliveries:
			if seq >= r.first {
				t.Fatalf("message %d of the run %d–%d was delivered before the run's sync", seq, r.first, r.last)
			}
			seen[seq] = true
		case <-hold:
			break holding
		}
	}
	released = true
	close(release)
	deadline := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case seq := <-deliveries:
			seen[seq] = true
		case <-deadline:
			t.Fatalf("after the sync the consumer got %d of the %d messages", len(seen), n)
		}
	}
}
