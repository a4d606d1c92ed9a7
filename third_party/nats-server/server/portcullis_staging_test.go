// Portcullis patch tests (see PORTCULLIS.md at the module's root).

package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A stream marked with StageAtomicBatchesInMemory stages its batches in a
// memory store and writes nothing under its batches directory; an unmarked
// one, or the same name in another account, keeps the file store.
func TestPortcullisStagesMarkedStreamsInMemory(t *testing.T) {
	dir := t.TempDir()
	s, err := NewServer(&Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, SyncAlways: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
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
