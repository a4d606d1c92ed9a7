package server

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// gcPercent is a gateway process's GOGC. A tools/call leaves hundreds of
// kilobytes of short-lived garbage (most of it the MCP SDK's decoding
// buffers), and the embedded JetStream server, the committers and the
// front door share the process: at the default (100) tools/call at 64
// clients gave 0.75× the calls/s it gives at 400, at a third more CPU per
// call (BENCHMARKS.md, 2026-12-02 afternoon).
const gcPercent = 400

// gcMemoryShare is the share of the process's memory (its cgroup's limit,
// else the machine's) the collector's soft limit allows.
const gcMemoryShare = 0.5

// TuneGC sets the collector of a gateway process: GOGC 400 with a soft
// memory limit of half the memory it may use (so a large live heap is
// collected sooner instead of growing five times over). GOGC or
// GOMEMLIMIT in the environment wins: with GOGC set nothing is changed,
// with only GOMEMLIMIT set only GOGC is. `portcullis serve` calls it, as
// does the benchmark suite for the gateways it hosts.
//
// The limit comes from automemlimit (github.com/KimMachineGun/automemlimit):
// it reads cgroup v1 and v2 limits, which a container's /proc/meminfo does
// not show, and is what the Go ecosystem uses for this.
func TuneGC(lg *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	limit, err := memlimit.Set(memlimit.WithRatio(gcMemoryShare),
		memlimit.WithProvider(memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)))
	if err != nil {
		lg.Warn("no memory limit for the garbage collector", "err", err)
	}
	lg.Info("garbage collector set for a gateway (set GOGC or GOMEMLIMIT to choose)", "gogc", gcPercent, "memory_limit_bytes", limit)
}
