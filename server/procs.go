package server

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
)

// fsyncProcsFactor is how many Go processors per core the process runs
// when its embedded JetStream server holds several execution shards.
// With sync always, each stream's loop sits in fsync for most of each
// write, and a goroutine in a system call keeps its processor until the
// runtime's monitor takes it back: with one processor per core, the other
// shards' loops, the readers and the callers wait behind one shard's
// fsync while the cores idle. Of 1, 2, 4 and 8 per core (two cores), 2
// gave 16 shards as much as 4 or 8; one shard gains nothing from it and
// spends more CPU on idle processors at one caller, so it keeps the
// runtime's count
// (docs/performance.md, "Processors and fsync").
const fsyncProcsFactor = 2

// StartProcs is the processor count the Go runtime chose for this
// process. A benchmark that runs gateways of different shard counts one
// after another sets it back between them.
var StartProcs = runtime.GOMAXPROCS(0)

var procsMu sync.Mutex

// RaiseProcsForFsync multiplies the processors the Go runtime chose by
// fsyncProcsFactor, unless GOMAXPROCS is set in the environment (then the
// operator's number stands) or the count was changed since start. It
// stops the runtime from following later changes of the container's CPU
// limit. A gateway calls it when its embedded server holds several
// execution shards; the benchmarks' raw ceiling over several streams does
// too, to measure the streams as a sharded ledger runs them.
func RaiseProcsForFsync(lg *slog.Logger) {
	procsMu.Lock()
	defer procsMu.Unlock()
	if runtime.GOMAXPROCS(0) != StartProcs {
		return // raised already, or set by the program
	}
	from, to, ok := fsyncProcs(os.Getenv("GOMAXPROCS"), StartProcs)
	if !ok {
		return
	}
	runtime.GOMAXPROCS(to)
	lg.Info("Go processors raised for the embedded JetStream server's fsyncs (set GOMAXPROCS to choose)", "from", from, "to", to)
}

// fsyncProcs is the processor count to run with: current times the
// factor, unless the environment sets GOMAXPROCS.
func fsyncProcs(env string, current int) (from, to int, ok bool) {
	if env != "" {
		return current, current, false
	}
	return current, current * fsyncProcsFactor, true
}
