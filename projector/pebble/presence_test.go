package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// The filter chain never calls a key it was given absent, however far it
// grew past its first capacity, says "absent" of almost every other one,
// and says nothing until it is ready. Keys given again (a head rewritten
// at every event) do not grow it.
func TestRowFilterChain(t *testing.T) {
	f := newRowFilter(100)
	k := func(s string, i int) []byte { return fmt.Appendf(nil, "%s%d", s, i) }
	for i := range 5000 {
		f.add(k("in", i))
	}
	for i := range 5000 {
		if f.absent(k("in", i)) || f.absent(k("out", i)) {
			t.Fatal("absent before the filter is ready")
		}
	}
	f.ready.Store(true)
	if len(f.filters) < 5 {
		t.Fatalf("%d filters after 50 times the first capacity, want a chain", len(f.filters))
	}
	grown := len(f.filters)
	for i := 3000; i < 5000; i++ {
		f.add(k("in", i))
	}
	if len(f.filters) != grown {
		t.Fatalf("%d filters after the newest keys were added again, want %d", len(f.filters), grown)
	}
	for i := range 5000 {
		if f.absent(k("in", i)) {
			t.Fatalf("in%d added, then called absent", i)
		}
	}
	present := 0
	for i := range 10000 {
		if !f.absent(k("out", i)) {
			present++
		}
	}
	if present > 100 {
		t.Fatalf("%d of 10000 keys never added called perhaps present, want at most 1 %%", present)
	}
}

// writeRows writes n executions' intent and head rows, tok<from>… with
// pc.exec.tok<i>.act_<i>, in batches of 1000.
func writeRows(t *testing.T, v *Views, stream string, from, n int, seq *uint64) {
	t.Helper()
	for lo := from; lo < from+n; lo += 1000 {
		var heads []projector.Row
		intents := map[string]projector.Intent{}
		for i := lo; i < min(lo+1000, from+n); i++ {
			*seq++
			ev := &pb.Event{ExecutionId: fmt.Sprintf("act_%d", i)}
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			heads = append(heads, projector.Row{Subject: testRowSubject(i), Seq: *seq, Data: data, Event: ev})
			intents[fmt.Sprintf("tok%d", i)] = projector.Intent{Seq: *seq, LatestSubject: testRowSubject(i)}
		}
		if err := v.Write(stream, heads, intents, nil, projector.Mark{Seq: *seq}); err != nil {
			t.Fatal(err)
		}
	}
}

func testRowSubject(i int) string { return fmt.Sprintf("pc.exec.tok%d.act_%d", i, i) }

// checkRows: the intent and head of every one of tok0…tok<n-1> read
// their rows, those of the m after them are not found, and the filter
// answered most of those.
func checkRows(t *testing.T, v *Views, n, m int) {
	t.Helper()
	v.dropRecent() // not the filter
	ctx := context.Background()
	for i := range n {
		in, err := v.IntentRow(fmt.Sprintf("tok%d", i))
		if err != nil || in.LatestSubject != testRowSubject(i) {
			t.Fatalf("tok%d: %+v %v, want its row", i, in, err)
		}
		if h, err := v.Head(ctx, testRowSubject(i)); err != nil || h.Event.GetExecutionId() != fmt.Sprintf("act_%d", i) {
			t.Fatalf("head %d: %v, want its row", i, err)
		}
	}
	fromFilter := 0
	for i := n; i < n+m; i++ {
		if _, err := v.IntentRow(fmt.Sprintf("tok%d", i)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("tok%d never written: %v, want not found", i, err)
		}
		if _, err := v.Head(ctx, testRowSubject(i)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("head %d never written: %v, want not found", i, err)
		}
		if v.present.absent(key(intentPrefix, fmt.Sprintf("tok%d", i))) && v.present.absent(key(headPrefix, testRowSubject(i))) {
			fromFilter++
		}
	}
	if fromFilter < m*9/10 {
		t.Fatalf("the filter answered %d of %d absent intents and heads, want nearly all", fromFilter, m)
	}
}

// Rows written before Open are found through the scan, rows written
// after it through Write's adds, while the scan runs too: a reopened
// gateway never calls an intent or head it holds absent.
func TestRowFilterAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	writeRows(t, v, "S", 0, 20000, &seq)
	<-v.scanDone
	checkRows(t, v, 20000, 2000)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	v = reopenViews(t, dir)
	writeRows(t, v, "S", 20000, 10000, &seq) // while the scan runs
	<-v.scanDone
	if !v.present.ready.Load() {
		t.Fatal("the scan finished, the filter is not ready")
	}
	checkRows(t, v, 30000, 3000)
}

// Close waits for a scan that is still running (it asks it to stop) and
// closes the views: Pebble refuses to close under an open iterator, and
// panics.
func TestCloseDuringRowScan(t *testing.T) {
	dir, _ := closedViewsWithRows(t, 50000)
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

// closedViewsWithRows writes the intent and head rows of tok0…tok<n-1>
// into new views and closes them; seq is the last sequence written.
func closedViewsWithRows(t *testing.T, n int) (dir string, seq uint64) {
	t.Helper()
	dir = t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeRows(t, v, "S", 0, n, &seq)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seq
}

// reopenViews opens the views in dir (again, or new: openViews), closed
// when the test ends.
func reopenViews(t *testing.T, dir string) *Views {
	t.Helper()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Lookups race the writes and the scan of a reopened views: an intent or
// head is never called absent once its Write returned (run with -race).
func TestRowFilterUnderConcurrentLookups(t *testing.T) {
	dir, seq := closedViewsWithRows(t, 20000)
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
				if _, err := v.Head(context.Background(), testRowSubject(i)); err != nil {
					errs <- fmt.Errorf("head %d, written before the lookup: %w", i, err)
					return
				}
				// The recent caches answer for the new ones: ask the filter too.
				if v.present.absent(key(intentPrefix, tok)) || v.present.absent(key(headPrefix, testRowSubject(i))) {
					errs <- fmt.Errorf("%s, written before the lookup: the filter calls it absent", tok)
					return
				}
			}
		})
	}
	for lo := 20000; lo < 30000; lo += 1000 {
		writeRows(t, v, "S", lo, 1000, &seq)
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
