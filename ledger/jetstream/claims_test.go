package jetstream

import "testing"

// Which messages may share a batch or be in flight together: never two
// that could affect one condition, and otherwise any.
func TestClaims(t *testing.T) {
	claim := func(subject, filter string) outMsg { return outMsg{subject: subject, check: filter} }
	write := func(subject string) outMsg { return outMsg{subject: subject} }
	for _, tc := range []struct {
		name     string
		held, m  outMsg
		conflict bool
	}{
		{"one subject twice", write("pc.exec.i1.x1"), write("pc.exec.i1.x1"), true},
		{"two budget accounts", write("pc.budget.a"), write("pc.budget.b"), false},
		{"two executions of one intent", write("pc.exec.i1.x1"), write("pc.exec.i1.x2"), false},
		{"a new execution, then a write under its intent", claim("pc.exec.i1.x2", "pc.exec.i1.*"), write("pc.exec.i1.x1"), true},
		{"a write under an intent, then its new execution", write("pc.exec.i1.x1"), claim("pc.exec.i1.x2", "pc.exec.i1.*"), true},
		{"two new executions of one intent", claim("pc.exec.i1.x1", "pc.exec.i1.*"), claim("pc.exec.i1.x2", "pc.exec.i1.*"), true},
		{"new executions of two intents", claim("pc.exec.i1.x1", "pc.exec.i1.*"), claim("pc.exec.i2.x2", "pc.exec.i2.*"), false},
		{"a condition on a subject another writes", outMsg{subject: "pc.exec.i1.x1", check: "pc.exec.i9.x9"}, write("pc.exec.i9.x9"), true},
	} {
		c := newClaims()
		c.take(tc.held)
		if got := !c.free(tc.m); got != tc.conflict {
			t.Errorf("%s: conflict %v, want %v", tc.name, got, tc.conflict)
		}
		c.release(tc.held)
		if !c.free(tc.m) {
			t.Errorf("%s: still claimed after release", tc.name)
		}
	}

	// Two writes under one intent in flight: its new execution waits for both.
	c := newClaims()
	a, b := write("pc.exec.i1.x1"), write("pc.exec.i1.x2")
	c.take(a)
	c.take(b)
	n := claim("pc.exec.i1.x3", "pc.exec.i1.*")
	c.release(a)
	if c.free(n) {
		t.Fatal("a new execution went with a write under its intent still in flight")
	}
	c.release(b)
	if !c.free(n) {
		t.Fatal("the intent stays claimed after every write under it landed")
	}
}
