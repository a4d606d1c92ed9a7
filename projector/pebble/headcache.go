package pebble

import (
	"sync"

	"github.com/portcullis-dev/portcullis/ledger"
)

// Bounds of the head cache: a result body may be 256 KiB, so it is bounded
// by the bytes of the rows it holds as well as by their number.
const (
	headCacheEntries = 1 << 16
	headCacheBytes   = 32 << 20
)

// headCache holds, decoded, the heads this process's projectors wrote
// last, so the reads that follow a write on the same execution (the next
// transition's decision, the fold of the next event) cost a map lookup
// instead of a Pebble seek and a decode. Only Write fills it, after its
// batch committed and before the checkpoint moves past it, while holding
// the lock that orders the batches; a read never fills it, so an entry is
// never older than the head Pebble held when the entry was set. A miss
// reads Pebble. Its events are shared: nobody may change them.
type headCache struct {
	mu    sync.Mutex
	heads map[string]cachedHead
	bytes int
}

type cachedHead struct {
	head ledger.Head
	size int
}

func (c *headCache) get(subject string) (ledger.Head, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.heads[subject]
	return e.head, ok
}

// put remembers h as subject's head; size is the stored event's bytes
// (a bound on its row's).
func (c *headCache) put(subject string, h ledger.Head, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.heads[subject]; ok {
		c.bytes -= old.size
	}
	if c.heads == nil || len(c.heads) >= headCacheEntries || c.bytes+size > headCacheBytes {
		c.heads, c.bytes = make(map[string]cachedHead), 0 // simplest bound: a miss only costs a read
	}
	c.heads[subject] = cachedHead{head: h, size: size}
	c.bytes += size
}
