package pebble

import (
	"sync"

	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// Bounds of one generation of the recent-rows caches (two generations are
// kept, so each cache holds at most twice these). A result body may be
// 256 KiB, so the heads are bounded by the bytes of the rows they hold as
// well as by their number.
const (
	headCacheEntries   = 1 << 15
	headCacheBytes     = 16 << 20
	intentCacheEntries = 1 << 15
	intentCacheBytes   = 8 << 20
)

// recentCache holds, decoded, the rows this process's projectors wrote
// last (the heads, the intents), so the reads that follow a write on the
// same key (the next transition's decision, a retry's attach, the fold of
// the next event) cost a map lookup instead of a Pebble seek and a decode.
//
// Only Write fills it, after its batch committed and before the
// checkpoint moves past it, while holding the lock that orders the
// batches; a read never fills it, so an entry is never older than the row
// Pebble held when the entry was set. A miss reads Pebble.
//
// It keeps two generations: when the current one reaches its bound it
// becomes the previous one (the one before is dropped) and a new one
// starts, so the most recent writes, at least one generation of them,
// are always held. Emptying the whole cache at its bound instead left
// anywhere from none to all of a retry's recent executions cached
// (docs/performance.md, "Recent rows in memory"). Lookups try the current
// generation first: a key written again since the switch is found there.
type recentCache[V any] struct {
	maxEntries, maxBytes int

	mu        sync.Mutex
	cur, prev map[string]cachedRow[V]
	bytes     int // of cur
}

type cachedRow[V any] struct {
	row  V
	size int
}

func newRecentCache[V any](maxEntries, maxBytes int) *recentCache[V] {
	return &recentCache[V]{maxEntries: maxEntries, maxBytes: maxBytes}
}

func (c *recentCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[key]; ok {
		return e.row, true
	}
	e, ok := c.prev[key]
	return e.row, ok
}

// put remembers row as key's; size is its bytes (a bound on its row's).
func (c *recentCache[V]) put(key string, row V, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.cur[key]; ok {
		c.bytes -= old.size
		delete(c.cur, key)
	}
	if c.cur == nil || len(c.cur) >= c.maxEntries || c.bytes+size > c.maxBytes {
		// The new generation starts at the size the last one reached, so
		// it does not grow (rehashing) its way there again.
		c.prev, c.cur, c.bytes = c.cur, make(map[string]cachedRow[V], len(c.cur)), 0
	}
	c.cur[key] = cachedRow[V]{row: row, size: size}
	c.bytes += size
}

// The views' caches: heads by subject, intent rows by token.
type (
	headCache   = recentCache[ledger.Head]
	intentCache = recentCache[projector.Intent]
)

func newHeadCache() *headCache { return newRecentCache[ledger.Head](headCacheEntries, headCacheBytes) }
func newIntentCache() *intentCache {
	return newRecentCache[projector.Intent](intentCacheEntries, intentCacheBytes)
}
