// Portcullis patch tests (see PORTCULLIS.md at the module's root).

package server

import (
	"errors"
	"testing"
	"time"
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
