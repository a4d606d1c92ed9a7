// Portcullis patch tests (see PORTCULLIS.md at the module's root).

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A stream marked with StageAtomicBatchesInMemory stages its batches in a
// memory store and writes nothing under its batches directory; an unmarked
// one, or the same name in another account, keeps the file store.
func TestPortcullisStagesMarkedStreamsInMemory(t *testing.T) {
	s := portcullisTestServer(t, t.TempDir())
	acc := s.GlobalAccount()
	add := func(name string) *stream {
		t.Helper()
		mset, err := acc.addStream(&StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: FileStorage, Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		return mset
	}
	mem, disk := add("M"), add("D")
	s.StageAtomicBatchesInMemory(acc.Name, "M")
	s.StageAtomicBatchesInMemory("OTHER", "D")

	jsa := acc.js
	staged := func(mset *stream) StreamStore {
		t.Helper()
		st, err := newBatchStore(mset, "b1", 1, FileStorage, jsa.storeDir, mset.name())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Delete(true) })
		return st
	}
	if _, ok := staged(mem).(*memStore); !ok {
		t.Fatal("the marked stream stages its batch in a file store")
	}
	if _, err := os.Stat(filepath.Join(jsa.storeDir, streamsDir, "M", batchesDir)); !os.IsNotExist(err) {
		t.Fatalf("the marked stream's batch wrote its batches directory (%v)", err)
	}
	if _, ok := staged(disk).(*fileStore); !ok {
		t.Fatal("a stream marked only in another account stages in memory")
	}
	if _, err := os.Stat(filepath.Join(jsa.storeDir, streamsDir, "D", batchesDir)); err != nil {
		t.Fatalf("the unmarked stream's batch is not in its batches directory: %v", err)
	}
}

// A commit of a batch staged in memory cut short by a crash leaves a prefix
// of the batch in the stream, which the next start cannot finish (nothing is
// staged on disk): the server starts, keeps the prefix as it is, and the
// stream takes the next message at the next sequence.
func TestPortcullisCutBatchStagedInMemoryLeavesPrefix(t *testing.T) {
	dir := t.TempDir()
	s := portcullisTestServer(t, dir)
	acc := s.GlobalAccount()
	mset, err := acc.addStream(&StreamConfig{Name: "M", Subjects: []string{"M.>"}, Storage: FileStorage, Replicas: 1, AllowAtomicPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	s.StageAtomicBatchesInMemory(acc.Name, "M")
	// What a commit leaves when the process dies after storing the first
	// two of a batch's three messages: each carries the batch's id and
	// sequence, none the commit header.
	for i := 1; i <= 2; i++ {
		hdr := genHeader(nil, JSBatchId, "cut")
		hdr = genHeader(hdr, JSBatchSeq, fmt.Sprint(i))
		if err := mset.processJetStreamMsg(fmt.Sprintf("M.%d", i), _EMPTY_, hdr, []byte("x"), 0, 0, nil, false, true); err != nil {
			t.Fatal(err)
		}
	}
	s.Shutdown()
	s.WaitForShutdown()

	s = portcullisTestServer(t, dir)
	mset, err = s.GlobalAccount().lookupStream("M")
	if err != nil {
		t.Fatalf("the stream did not come back: %v", err)
	}
	if st := mset.state(); st.Msgs != 2 || st.LastSeq != 2 {
		t.Fatalf("after the restart the stream holds %d messages up to %d, want the prefix of 2", st.Msgs, st.LastSeq)
	}
	if err := mset.processJetStreamMsg("M.next", _EMPTY_, nil, []byte("y"), 0, 0, nil, false, true); err != nil {
		t.Fatalf("the stream refused the next message: %v", err)
	}
	if st := mset.state(); st.LastSeq != 3 {
		t.Fatalf("the next message landed at %d, want 3", st.LastSeq)
	}
}
