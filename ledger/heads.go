package ledger

import "sync"

// knownCacheSize bounds how many subjects a Service remembers of its own writes.
const knownCacheSize = 1 << 16

// knownCache remembers the latest event this gateway wrote or read per
// execution subject, the intent it belongs to, and where each execution
// lives, so a caller reads its own writes without waiting for the views.
// Entries are hints like the views: a stale one costs a conflict, never a
// wrong decision.
type knownCache struct {
	mu      sync.Mutex
	max     int
	heads   map[string]Head      // execution subject → head
	intents map[string]ownIntent // intent token → the execution this gateway created last
	ids     map[string]string    // execution id → subject
	keyed   map[string]string    // fingerprint → subject of the keyed execution this gateway created last
}

func newKnownCache(max int) *knownCache {
	c := &knownCache{max: max}
	c.reset()
	return c
}

func (c *knownCache) reset() {
	c.heads = make(map[string]Head)
	c.intents = make(map[string]ownIntent)
	c.ids = make(map[string]string)
	c.keyed = make(map[string]string)
}

// keyedSubject is the keyed execution with fingerprint fp this gateway
// created last.
func (c *knownCache) keyedSubject(fp string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.keyed[fp]
	return s, ok
}

// putKeyed records that this gateway created a keyed execution with
// fingerprint fp on subject.
func (c *knownCache) putKeyed(fp, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keyed[fp] = subject
}

func (c *knownCache) head(subject string) (Head, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.heads[subject]
	return h, ok
}

// ownIntent is an intent as this gateway left it when it created an
// execution for it: complete at that sequence, because the create's
// compare-and-set covered every execution of the intent.
type ownIntent struct {
	seq     uint64
	subject string // of the execution created
}

func (c *knownCache) intent(token string) (ownIntent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.intents[token]
	return h, ok
}

func (c *knownCache) subject(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.ids[id]
	return s, ok
}

// putHead records an event that landed at h.Seq.
func (c *knownCache) putHead(h Head) {
	subject := h.Event.GetSubject()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.heads) >= c.max {
		c.reset() // simplest bound; entries are only hints
	}
	if old, ok := c.heads[subject]; !ok || old.Seq < h.Seq {
		c.heads[subject] = h
	}
	c.ids[h.Event.GetExecutionId()] = subject
}

// putCreated records that this gateway created the intent's latest
// execution at h.Seq. Only a create knows the whole intent; other events
// move one execution and leave the intent to the views.
func (c *knownCache) putCreated(token string, h Head) {
	c.putHead(h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.intents[token].seq < h.Seq {
		c.intents[token] = ownIntent{seq: h.Seq, subject: h.Event.GetSubject()}
	}
}
