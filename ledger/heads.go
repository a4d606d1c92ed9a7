package ledger

import "sync"

// headCacheSize bounds the heads a Service remembers of its own writes.
const headCacheSize = 1 << 16

// headCache remembers the latest head this gateway wrote or read per
// subject, so a caller reads its own writes without waiting for the views.
// It is a hint like the views: a stale entry costs one conflict, never a
// wrong decision.
type headCache struct {
	mu  sync.Mutex
	max int
	m   map[string]Head
}

func newHeadCache(max int) *headCache { return &headCache{max: max, m: make(map[string]Head)} }

func (c *headCache) get(subject string) (Head, bool) {
	c.mu.Lock()
	h, ok := c.m[subject]
	c.mu.Unlock()
	return h, ok
}

// put keeps the newer of the known and the given head.
func (c *headCache) put(subject string, h Head) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[subject]; ok && old.Seq >= h.Seq {
		return
	}
	if len(c.m) >= c.max {
		clear(c.m) // simplest bound; entries are only hints
	}
	c.m[subject] = h
}
