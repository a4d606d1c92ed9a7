package pebble

import (
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cockroachdb/pebble/v2"
)

// Most Begins look up rows that do not exist yet: the intent (the Service)
// and the new execution's head (the projector, before it folds the
// ACCEPTED event). Pebble answers those from its memtables' skiplists (a
// seek through each, tens of cache misses) and each level's filter: about
// 9 % of a gateway's CPU at 64 callers (docs/performance.md, "Absent
// intents from memory" and "Absent heads from memory"). rowFilter answers
// them from memory: a set of Bloom filters over the key of every intent
// and head row the views hold, so "certainly absent" costs a few hashed
// bit tests and "perhaps present" reads Pebble as before.
//
// It never forgets a row the views hold (intent and head rows are never
// deleted, and a stale "perhaps" would only cost a read): Write adds a
// batch's keys before it commits them, and Open scans the rows written
// before it in the background. Until that scan finished, every lookup
// reads Pebble. A wrong "perhaps" only costs the read; there is no wrong
// "absent".
//
// The bits-and-blooms filter (a well-kept library: murmur3, sized from a
// capacity and a false-positive rate) cannot grow, so the set is a chain:
// when the newest filter holds its capacity, a new one of twice that
// takes the adds, and a lookup tests them all (14 at a billion
// executions).
type rowFilter struct {
	ready atomic.Bool // the rows written before Open are in

	mu      sync.RWMutex
	filters []*bloom.BloomFilter
	inLast  uint // keys added to the newest filter
	lastCap uint // its capacity
}

const (
	rowFilterFirstCap = 1 << 17
	rowFilterFP       = 0.001 // per filter
)

// filteredPrefixes are the rows rowFilter knows: the ones looked up for
// keys that mostly do not exist yet.
var filteredPrefixes = [][]byte{intentPrefix, headPrefix, keyedPrefix}

func newRowFilter(firstCap uint) *rowFilter {
	return &rowFilter{filters: []*bloom.BloomFilter{bloom.NewWithEstimates(firstCap, rowFilterFP)}, lastCap: firstCap}
}

// add remembers that the views may hold the row key k. A key the newest
// filter already answers "perhaps" for (most rows are written several
// times: a head at every event of its execution) fills nothing: the
// newest filter's capacity counts distinct keys.
func (f *rowFilter) add(k []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inLast >= f.lastCap {
		f.lastCap *= 2
		f.filters = append(f.filters, bloom.NewWithEstimates(f.lastCap, rowFilterFP))
		f.inLast = 0
	}
	if !f.filters[len(f.filters)-1].TestOrAdd(k) {
		f.inLast++
	}
}

// absent reports whether the views certainly hold no row under key k.
func (f *rowFilter) absent(k []byte) bool {
	if !f.ready.Load() {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, b := range f.filters {
		if b.Test(k) {
			return false
		}
	}
	return true
}

// scanRows adds the key of every intent and head row the views held at
// Open to the filter and then makes it answer. Close stops it (scanStop)
// and waits for it: Pebble refuses to close with an iterator open. A scan
// that fails or is stopped leaves the filter unanswering: every lookup
// reads Pebble.
func (v *Views) scanRows(f *rowFilter) {
	defer close(v.scanDone)
	for _, p := range filteredPrefixes {
		if !v.scanPrefix(f, p) {
			return
		}
	}
	f.ready.Store(true)
}

// scanPrefix adds every key under p to f; false when it failed or was
// stopped.
func (v *Views) scanPrefix(f *rowFilter, p []byte) bool {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return false
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if v.scanStop.Load() {
			return false
		}
		f.add(it.Key())
	}
	return it.Error() == nil
}
