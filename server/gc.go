package server

import (
	"bufio"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is a gateway process's GOGC. A tools/call leaves hundreds of
// kilobytes of short-lived garbage (most of it the MCP SDK's decoding
// buffers), and the embedded JetStream server, the committers and the
// front door share the process: at the default (100) tools/call at 64
// clients gave 0.75× the calls/s it gives at 400, at a third more CPU per
// call (BENCHMARKS.md, 2026-12-02 afternoon).
const gcPercent = 400

// TuneGC sets the collector of a gateway process: GOGC 400 with a soft
// memory limit of half the machine's memory (so a large live heap is
// collected sooner instead of growing five times over). GOGC or
// GOMEMLIMIT in the environment wins: with GOGC set nothing is changed,
// with only GOMEMLIMIT set only GOGC is. `portcullis serve` calls it, as
// does the benchmark suite for the gateways it hosts.
func TuneGC(lg *slog.Logger) {
	percent, limit := gcSettings(os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"), physicalMemory())
	if percent == 0 {
		return
	}
	debug.SetGCPercent(percent)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	lg.Info("garbage collector set for a gateway (set GOGC or GOMEMLIMIT to choose)", "gogc", percent, "memory_limit_bytes", limit)
}

// gcSettings is the GOGC and memory limit to run with (0: leave as is).
func gcSettings(gogc, memlimit string, physical int64) (percent int, limit int64) {
	if gogc != "" {
		return 0, 0
	}
	if memlimit == "" && physical > 0 {
		limit = physical / 2
	}
	return gcPercent, limit
}

// physicalMemory is the machine's memory in bytes from /proc/meminfo (0
// where there is none).
func physicalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
