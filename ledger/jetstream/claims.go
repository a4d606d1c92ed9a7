package jetstream

import "strings"

// claims are what the messages of the group being built and of the groups
// in flight touch, so that no two messages that could affect one condition
// share a batch or are in flight at once (the server checks a batch's
// conditions against the stream before the batch, and caches a filter's
// answer within it). Two messages conflict when they write one subject,
// when one writes a subject the other's condition reads, or when one writes
// under a filter ("a.b.c" lies under "a.b.*") the other's condition reads.
// Two messages that only write under one filter do not: budget accounts
// (pc.budget.<account>) all lie under pc.budget.*, which no condition
// reads, so decisions on different accounts share a batch; a new
// execution's claim reads its intent's filter, so it never shares a batch
// with another write under that intent.
type claims struct {
	subjects map[string]struct{} // subjects written, and subjects a condition reads
	under    map[string]int      // parent filters written under, by how many messages
	filters  map[string]struct{} // filters a condition reads
}

func newClaims() claims {
	return claims{subjects: map[string]struct{}{}, under: map[string]int{}, filters: map[string]struct{}{}}
}

// parentFilter is the filter a subject lies under: "a.b.c" → "a.b.*".
func parentFilter(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[:i] + ".*"
	}
	return subject
}

func isFilter(s string) bool { return strings.ContainsAny(s, "*>") }

// free reports whether m conflicts with nothing claimed.
func (c claims) free(m outMsg) bool {
	if _, ok := c.subjects[m.subject]; ok {
		return false
	}
	if _, ok := c.filters[parentFilter(m.subject)]; ok {
		return false // m writes under a filter a condition in flight reads
	}
	r := m.checked()
	if !isFilter(r) {
		_, ok := c.subjects[r]
		return !ok
	}
	if c.under[r] > 0 {
		return false // m's condition reads a filter something in flight writes under
	}
	_, ok := c.filters[r]
	return !ok
}

// take claims what m touches; release gives it back.
func (c claims) take(m outMsg) {
	c.subjects[m.subject] = struct{}{}
	c.under[parentFilter(m.subject)]++
	if r := m.checked(); isFilter(r) {
		c.filters[r] = struct{}{}
	} else {
		c.subjects[r] = struct{}{}
	}
}

func (c claims) release(m outMsg) {
	delete(c.subjects, m.subject)
	p := parentFilter(m.subject)
	if c.under[p]--; c.under[p] <= 0 {
		delete(c.under, p)
	}
	if r := m.checked(); isFilter(r) {
		delete(c.filters, r)
	} else {
		delete(c.subjects, r)
	}
}
