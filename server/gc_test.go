package server

import "testing"

func TestGCSettings(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		gogc, memlimit string
		physical       int64
		percent        int
		limit          int64
	}{
		{"", "", 24 * gib, gcPercent, 12 * gib}, // the gateway's default
		{"", "", 0, gcPercent, 0},               // memory unknown: no limit
		{"", "8GiB", 24 * gib, gcPercent, 0},    // the operator's limit stands
		{"100", "", 24 * gib, 0, 0},             // the operator's GOGC: nothing changed
		{"off", "8GiB", 24 * gib, 0, 0},
	} {
		p, l := gcSettings(tc.gogc, tc.memlimit, tc.physical)
		if p != tc.percent || l != tc.limit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q, %d bytes: got %d, %d; want %d, %d", tc.gogc, tc.memlimit, tc.physical, p, l, tc.percent, tc.limit)
		}
	}
	if physicalMemory() <= 0 {
		t.Errorf("no MemTotal read from /proc/meminfo")
	}
}
