// Portcullis patch tests (see PORTCULLIS.md at the module's root).

package server

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func portcullisLastSeqStore(t *testing.T, dir string) *fileStore {
	t.Helper()
	fs, err := newFileStore(FileStoreConfig{StoreDir: dir, BlockSize: 4 * 1024},
		StreamConfig{Name: "zzz", Subjects: []string{"s.>"}, Storage: FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// The last sequence the compare-and-set checks read is LoadLastMsg's, for
// every subject (one never stored, a wildcard), through stores, removals
// of any message, subject purges, compactions and restarts.
func TestPortcullisLastSeqAgreesWithLoadLast(t *testing.T) {
	dir := t.TempDir()
	fs := portcullisLastSeqStore(t, dir)
	defer func() { fs.Stop() }()
	const subjects = 24
	rng := rand.New(rand.NewPCG(7, 11))
	// Subjects as the ledger's: s.<intent>.<execution>, checked alone and
	// by their intent's filter (s.<intent>.*), as a new execution's
	// compare-and-set does.
	subj := func(i int) string { return fmt.Sprintf("s.%d.%d", i%6, i) }
	payload := make([]byte, 100)
	fast, fastFilter := 0, 0
	check := func(step int, op string) {
		t.Helper()
		var names []string
		for i := range subjects + 1 { // s.0.<subjects> is never stored
			names = append(names, subj(i))
		}
		for g := range 7 { // s.6.* matches nothing
			names = append(names, fmt.Sprintf("s.%d.*", g))
		}
		for _, sub := range append(names, "s.>") {
			var smv StoreMsg
			var want uint64
			sm, wantErr := fs.LoadLastMsg(sub, &smv)
			if sm != nil {
				want = sm.seq
			}
			got, err := lastSeqForSubject(fs, sub)
			if got != want || err != wantErr {
				t.Fatalf("step %d (%s), %s: last sequence %d (%v), LoadLastMsg %d (%v)", step, op, sub, got, err, want, wantErr)
			}
			if _, known := fs.knownLastSeq(sub); known && subjectHasWildcard(sub) {
				fastFilter++
			} else if known {
				fast++
			}
		}
	}
	for step := range 1500 {
		var op string
		switch r := rng.IntN(100); {
		case r < 80:
			op = "store"
			if _, _, err := fs.StoreMsg(subj(rng.IntN(subjects)), nil, payload, 0); err != nil {
				t.Fatal(err)
			}
		case r < 92:
			op = "remove"
			var st StreamState
			fs.FastState(&st)
			if st.LastSeq > 0 {
				fs.RemoveMsg(st.FirstSeq + rng.Uint64N(st.LastSeq-st.FirstSeq+1))
			}
		case r < 96:
			op = "purge subject"
			if _, err := fs.PurgeEx(subj(rng.IntN(subjects)), 0, rng.Uint64N(3)); err != nil {
				t.Fatal(err)
			}
		case r < 98:
			op = "compact"
			var st StreamState
			fs.FastState(&st)
			if _, err := fs.Compact(st.FirstSeq + rng.Uint64N(8)); err != nil {
				t.Fatal(err)
			}
		default:
			op = "restart"
			if err := fs.Stop(); err != nil {
				t.Fatal(err)
			}
			fs = portcullisLastSeqStore(t, dir)
		}
		check(step, op)
	}
	if fast == 0 || fastFilter == 0 {
		t.Fatalf("the index knew a subject's last sequence %d times, a filter's %d: the others loaded blocks", fast, fastFilter)
	}
	t.Logf("answered from the index: %d subjects, %d filters", fast, fastFilter)
}

// A subject whose last message sits in a block no longer in memory is
// answered from the index, without loading that block (LoadLastMsg loads
// it); after a restart the first answer loads it and the next store on
// the subject makes it known again.
func TestPortcullisLastSeqLoadsNoBlock(t *testing.T) {
	dir := t.TempDir()
	fs := portcullisLastSeqStore(t, dir)
	defer func() { fs.Stop() }()
	payload := make([]byte, 200)
	first, _, err := fs.StoreMsg("s.old", nil, payload, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, _, err := fs.StoreMsg(fmt.Sprintf("s.%d", i), nil, payload, 0); err != nil {
			t.Fatal(err)
		}
	}
	old := func() *msgBlock {
		fs.mu.RLock()
		defer fs.mu.RUnlock()
		if len(fs.blks) < 3 {
			t.Fatalf("%d blocks, want the old subject's block to be an old one", len(fs.blks))
		}
		return fs.blks[0]
	}
	loaded := func(mb *msgBlock) bool {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		return !mb.cacheNotLoaded()
	}
	mb := old()
	mb.tryForceExpireCache()
	if loaded(mb) {
		t.Fatal("the old block's cache did not expire")
	}
	if seq, err := lastSeqForSubject(fs, "s.old"); seq != first || err != nil {
		t.Fatalf("last sequence of s.old: %d (%v), want %d", seq, err, first)
	}
	if loaded(mb) {
		t.Fatal("the last sequence loaded the old block")
	}
	var smv StoreMsg
	if sm, err := fs.LoadLastMsg("s.old", &smv); err != nil || sm.seq != first {
		t.Fatalf("LoadLastMsg: %v, %v", sm, err)
	}
	if !loaded(mb) {
		t.Fatal("LoadLastMsg did not load the old block: this test tells nothing apart")
	}

	if err := fs.Stop(); err != nil {
		t.Fatal(err)
	}
	fs = portcullisLastSeqStore(t, dir)
	if _, known := fs.knownLastSeq("s.old"); known {
		t.Fatal("a last sequence known right after a restart")
	}
	if seq, err := lastSeqForSubject(fs, "s.old"); seq != first || err != nil {
		t.Fatalf("after a restart, last sequence of s.old: %d (%v), want %d", seq, err, first)
	}
	next, _, err := fs.StoreMsg("s.old", nil, payload, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seq, known := fs.knownLastSeq("s.old"); !known || seq != next {
		t.Fatalf("after a store: known %v, %d, want %d", known, seq, next)
	}
}
