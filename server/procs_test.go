package server

import "testing"

func TestFsyncProcs(t *testing.T) {
	for _, c := range []struct {
		env         string
		current, to int
		ok          bool
	}{
		{"", 2, 4, true},
		{"", 1, 2, true},
		{"3", 3, 3, false}, // the operator's number stands
		{"2", 2, 2, false},
	} {
		_, to, ok := fsyncProcs(c.env, c.current)
		if to != c.to || ok != c.ok {
			t.Errorf("fsyncProcs(%q, %d) = %d, %v; want %d, %v", c.env, c.current, to, ok, c.to, c.ok)
		}
	}
}
