package pebble

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// The filter chain never calls a token it was given absent, however far
// it grew past its first capacity, says "absent" of almost every other
// one, and says nothing until it is ready.
func TestIntentFilterChain(t *testing.T) {
	f := newIntentFilter(100)
	for i := range 5000 {
		f.add(fmt.Sprintf("in%d", i))
	}
	for i := range 5000 {
		if f.absent(fmt.Sprintf("in%d", i)) || f.absent(fmt.Sprintf("out%d", i)) {
			t.Fatal("absent before the filter is ready")
		}
	}
	f.ready.Store(true)
	if len(f.filters) < 5 {
		t.Fatalf("%d filters after 50 times the first capacity, want a chain", len(f.filters))
	}
	for i := range 5000 {
		if f.absent(fmt.Sprintf("in%d", i)) {
			t.Fatalf("in%d added, then called absent", i)
		}
	}
	present := 0
	for i := range 10000 {
		if !f.absent(fmt.Sprintf("out%d", i)) {
			present++
		}
	}
	if present > 100 {
		t.Fatalf("%d of 10000 tokens never added called perhaps present, want at most 1 %%", present)
	}
}

// writeIntents writes n intent rows tok<from>…, in batches of 1000.
func writeIntents(t *testing.T, v *Views, stream string, from, n int, seq *uint64) {
	t.Helper()
	for lo := from; lo < from+n; lo += 1000 {
		intents := map[string]projector.Intent{}
		for i := lo; i < min(lo+1000, from+n); i++ {
			*seq++
			intents[fmt.Sprintf("tok%d", i)] = projector.Intent{Seq: *seq, LatestSubject: fmt.Sprintf("pc.exec.tok%d.act_%d", i, i)}
		}
		if err := v.Write(stream, nil, intents, nil, projector.Mark{Seq: *seq}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIntents: every token of tok<0>…tok<n-1> reads its row, none of the
// m tokens after them does, and the filter answered most of those.
func checkIntents(t *testing.T, v *Views, n, m int) {
	t.Helper()
	v.dropRecent() // not the filter
	for i := range n {
		in, err := v.IntentRow(fmt.Sprintf("tok%d", i))
		if err != nil || in.LatestSubject != fmt.Sprintf("pc.exec.tok%d.act_%d", i, i) {
			t.Fatalf("tok%d: %+v %v, want its row", i, in, err)
		}
	}
	fromFilter := 0
	for i := n; i < n+m; i++ {
		if _, err := v.IntentRow(fmt.Sprintf("tok%d", i)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("tok%d never written: %v, want not found", i, err)
		}
		if v.present.absent(fmt.Sprintf("tok%d", i)) {
			fromFilter++
		}
	}
	if fromFilter < m*9/10 {
		t.Fatalf("the filter answered %d of %d absent tokens, want nearly all", fromFilter, m)
	}
}

// Rows written before Open are found through the scan, rows written
// after it through Write's adds, while the scan runs too: a reopened
// gateway never calls an intent it holds absent.
func TestIntentFilterAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	writeIntents(t, v, "S", 0, 20000, &seq)
	<-v.scanDone
	checkIntents(t, v, 20000, 2000)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	v = reopenViews(t, dir)
	writeIntents(t, v, "S", 20000, 10000, &seq) // while the scan runs
	<-v.scanDone
	if !v.present.ready.Load() {
		t.Fatal("the scan finished, the filter is not ready")
	}
	checkIntents(t, v, 30000, 3000)
}

// Close waits for a scan that is still running (it asks it to stop) and
// closes the views: Pebble refuses to close under an open iterator, and
// panics.
func TestCloseDuringIntentScan(t *testing.T) {
	dir, _ := closedViewsWithIntents(t, 50000)
	for range 3 {
		v, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// closedViewsWithIntents writes the intent rows tok0…tok<n-1> into new
// views and closes them; seq is the last sequence written.
func closedViewsWithIntents(t *testing.T, n int) (dir string, seq uint64) {
	t.Helper()
	dir = t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeIntents(t, v, "S", 0, n, &seq)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seq
}

// reopenViews opens the views in dir again, closed when the test ends.
func reopenViews(t *testing.T, dir string) *Views {
	t.Helper()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Lookups race the writes and the scan of a reopened views: a token is
// never called absent once its Write returned (run with -race).
func TestIntentFilterUnderConcurrentLookups(t *testing.T) {
	dir, seq := closedViewsWithIntents(t, 20000)
	v := reopenViews(t, dir)
	var written atomic.Int64 // tokens tok0…tok<written-1> are in
	written.Store(20000)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(int(written.Load()))
				tok := fmt.Sprintf("tok%d", i)
				if _, err := v.IntentRow(tok); err != nil {
					errs <- fmt.Errorf("%s, written before the lookup: %w", tok, err)
					return
				}
				if v.present.absent(tok) { // the recent cache answers IntentRow for the new ones
					errs <- fmt.Errorf("%s, written before the lookup: the filter calls it absent", tok)
					return
				}
			}
		})
	}
	for lo := 20000; lo < 30000; lo += 1000 {
		writeIntents(t, v, "S", lo, 1000, &seq)
		written.Store(int64(lo + 1000))
	}
	<-v.scanDone
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
