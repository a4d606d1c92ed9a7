package server

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TuneGC sets GOGC 400 and a soft limit of half the memory, unless the
// environment chose: GOGC set changes nothing, GOMEMLIMIT set keeps the
// limit.
func TestTuneGC(t *testing.T) {
	pct, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(limit) })
	lg := slog.New(slog.DiscardHandler)
	system, err := memlimit.FromSystem()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, gogc, memlimit string
		wantPct              int
		wantLimit            func(int64) bool
	}{
		{"the gateway's default", "", "", gcPercent, func(l int64) bool { return l > 0 && uint64(l) <= system/2 }},
		{"the operator's limit stands", "", "8GiB", gcPercent, func(l int64) bool { return l == math.MaxInt64 }},
		{"the operator's GOGC: nothing changed", "100", "", 100, func(l int64) bool { return l == math.MaxInt64 }},
		{"GOGC off", "off", "8GiB", 100, func(l int64) bool { return l == math.MaxInt64 }},
	} {
		t.Setenv("GOGC", tc.gogc)
		t.Setenv("GOMEMLIMIT", tc.memlimit)
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		TuneGC(lg)
		if got, l := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != tc.wantPct || !tc.wantLimit(l) {
			t.Errorf("%s: GOGC %d, limit %d bytes (the machine has %d)", tc.name, got, l, system)
		}
	}
}
