package pebble

import (
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cockroachdb/pebble/v2"
)

// Most Begins look up an intent that does not exist yet. Pebble answers
// that from its memtables' skiplists (a seek through each, tens of cache
// misses) and each level's filter: about 9 % of a gateway's CPU at 64
// callers (docs/performance.md, "Absent intents from memory").
// intentFilter answers it from memory: a set of Bloom filters over every
// intent token the views hold, so "certainly absent" costs a few hashed
// bit tests and "perhaps present" reads Pebble as before.
//
// It never forgets a token the views hold (intent rows are never
// deleted): Write adds a batch's tokens before it commits them, and Open
// scans the rows written before it in the background. Until that scan
// finished, every lookup reads Pebble. A wrong "perhaps" only costs the
// read; there is no wrong "absent".
//
// The bits-and-blooms filter (a well-kept library: murmur3, sized from a
// capacity and a false-positive rate) cannot grow, so the set is a chain:
// when the newest filter holds its capacity, a new one of twice that
// takes the adds, and a lookup tests them all (14 at a billion
// tokens).
type intentFilter struct {
	ready atomic.Bool // the rows written before Open are in

	mu      sync.RWMutex
	filters []*bloom.BloomFilter
	inLast  uint // tokens added to the newest filter
	lastCap uint // its capacity
}

const (
	intentFilterFirstCap = 1 << 16
	intentFilterFP       = 0.001 // per filter
)

func newIntentFilter(firstCap uint) *intentFilter {
	return &intentFilter{filters: []*bloom.BloomFilter{bloom.NewWithEstimates(firstCap, intentFilterFP)}, lastCap: firstCap}
}

// add remembers that the views may hold token.
func (f *intentFilter) add(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inLast >= f.lastCap {
		f.lastCap *= 2
		f.filters = append(f.filters, bloom.NewWithEstimates(f.lastCap, intentFilterFP))
		f.inLast = 0
	}
	f.filters[len(f.filters)-1].AddString(token)
	f.inLast++
}

// absent reports whether the views certainly hold no row for token.
func (f *intentFilter) absent(token string) bool {
	if !f.ready.Load() {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, b := range f.filters {
		if b.TestString(token) {
			return false
		}
	}
	return true
}

// scanIntents adds every intent row the views held at Open to the filter
// and then makes it answer. Close stops it (scanStop) and waits for it:
// Pebble refuses to close with an iterator open. A scan that fails or is
// stopped leaves the filter unanswering: every lookup reads Pebble.
func (v *Views) scanIntents(f *intentFilter) {
	defer close(v.scanDone)
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: intentPrefix, UpperBound: prefixEnd(intentPrefix)})
	if err != nil {
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if v.scanStop.Load() {
			return
		}
		f.add(string(it.Key()[len(intentPrefix):]))
	}
	if it.Error() == nil {
		f.ready.Store(true)
	}
}
