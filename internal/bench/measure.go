package main

import (
	"context"
	"fmt"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portcullis-dev/portcullis/internal/benchkit"
)

// Cell is one measured point: a series at one concurrency.
type Cell struct {
	Series  string  `json:"series"`
	Callers int     `json:"callers"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"` // ops per second
	Unit    string  `json:"unit"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	// CPUPerOp is this process's CPU time (user + system: callers, gateway,
	// embedded NATS server, views; not Postgres or Redis, which run apart)
	// per operation, in µs; Cores is that CPU time over the window.
	CPUPerOp float64 `json:"cpu_us_per_op"`
	Cores    float64 `json:"cores_busy"`
	Note     string  `json:"note,omitempty"`
	// ViewsCompacting says in how many samples of the window each
	// gateway's views had a Pebble compaction running (the hot account).
	ViewsCompacting string `json:"views_compacting,omitempty"`
	// Rounds are the cell's measurements, one per round (-rounds), when
	// it was measured more than once; the fields above are their medians
	// (Ops and Seconds their sums).
	Rounds []Round `json:"rounds,omitempty"`
}

// Round is one measurement of a cell measured in several rounds.
type Round struct {
	Rate     float64 `json:"rate"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	CPUPerOp float64 `json:"cpu_us_per_op"`
	// ViewsCompacting is the round's (Cell.ViewsCompacting).
	ViewsCompacting string `json:"views_compacting,omitempty"`
}

// cellKey names a cell of the side-by-side table.
type cellKey struct {
	series  string
	callers int
}

// medianCell is one cell from its rounds: each figure the median of the
// rounds' (of an even count, the mean of the middle two), the operations
// and seconds summed, every round kept.
func medianCell(rounds []Cell) Cell {
	if len(rounds) == 1 {
		return rounds[0]
	}
	out := rounds[0]
	out.Ops, out.Seconds, out.Rounds, out.ViewsCompacting = 0, 0, nil, ""
	field := func(f func(Cell) float64) float64 {
		vs := make([]float64, len(rounds))
		for i, c := range rounds {
			vs[i] = f(c)
		}
		slices.Sort(vs)
		m := len(vs) / 2
		if len(vs)%2 == 0 {
			return (vs[m-1] + vs[m]) / 2
		}
		return vs[m]
	}
	out.Rate = field(func(c Cell) float64 { return c.Rate })
	out.P50 = field(func(c Cell) float64 { return c.P50 })
	out.P99 = field(func(c Cell) float64 { return c.P99 })
	out.CPUPerOp = field(func(c Cell) float64 { return c.CPUPerOp })
	out.Cores = field(func(c Cell) float64 { return c.Cores })
	lo, hi := rounds[0].Rate, rounds[0].Rate
	for _, c := range rounds {
		out.Ops += c.Ops
		out.Seconds += c.Seconds
		out.Rounds = append(out.Rounds, Round{Rate: c.Rate, P50: c.P50, P99: c.P99, CPUPerOp: c.CPUPerOp, ViewsCompacting: c.ViewsCompacting})
		lo, hi = min(lo, c.Rate), max(hi, c.Rate)
	}
	out.Note = strings.TrimPrefix(out.Note+fmt.Sprintf("; median of %d rounds, rate %.0f–%.0f", len(rounds), lo, hi), "; ")
	return out
}

func (c *Cell) setCPU(cpu time.Duration) {
	if c.Ops > 0 {
		c.CPUPerOp = float64(cpu.Microseconds()) / float64(c.Ops)
	}
	if c.Seconds > 0 {
		c.Cores = cpu.Seconds() / c.Seconds
	}
}

// measureFor runs op from callers goroutines: first for warm (not
// counted), then for dur; every caller keeps exactly one operation in
// flight, and the cell counts the operations completed within dur. i is
// unique across the run.
func measureFor(ctx context.Context, series string, callers int, warm, dur time.Duration, op func(ctx context.Context, caller, i int) error) (Cell, error) {
	var next atomic.Int64
	var stop atomic.Bool
	var counting atomic.Bool
	lat := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := int(next.Add(1)) - 1
				t0 := time.Now()
				if err := op(ctx, c, i); err != nil {
					errs[c] = err
					stop.Store(true)
					return
				}
				// An operation counts when it completes inside the window.
				if counting.Load() && !stop.Load() {
					lat[c] = append(lat[c], time.Since(t0))
				}
			}
		}()
	}
	time.Sleep(warm)
	stopProfile, err := record(cellProfilePath(series, callers), pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		stop.Store(true)
		wg.Wait()
		return Cell{}, err
	}
	counting.Store(true)
	start, cpu0 := time.Now(), benchkit.CPUTime()
	time.Sleep(dur)
	stop.Store(true)
	elapsed, cpu := time.Since(start), benchkit.CPUTime()-cpu0
	stopProfile()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return Cell{}, err
		}
	}
	c := cellOf(callers, elapsed, slices.Concat(lat...))
	c.setCPU(cpu)
	return c, nil
}

// measureCountAs is measureCount for a measured cell: with
// -cell-cpuprofile it records the run's CPU profile under label (a
// series, its round marked when there are several).
func measureCountAs(ctx context.Context, label string, callers, n int, op func(ctx context.Context, caller, i int) error) (Cell, error) {
	stop, err := record(cellProfilePath(label, callers), pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return Cell{}, err
	}
	defer stop()
	return measureCount(ctx, callers, n, op)
}

// measureCount runs exactly n operations from callers goroutines.
func measureCount(ctx context.Context, callers, n int, op func(ctx context.Context, caller, i int) error) (Cell, error) {
	var next atomic.Int64
	lat := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), benchkit.CPUTime()
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(ctx, c, i); err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), benchkit.CPUTime()-cpu0
	for _, err := range errs {
		if err != nil {
			return Cell{}, err
		}
	}
	c := cellOf(callers, elapsed, slices.Concat(lat...))
	c.setCPU(cpu)
	return c, nil
}

func cellOf(callers int, elapsed time.Duration, all []time.Duration) Cell {
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(float64(len(all))*p))]) / float64(time.Millisecond)
	}
	return Cell{
		Callers: callers, Ops: len(all), Seconds: elapsed.Seconds(),
		Rate: float64(len(all)) / elapsed.Seconds(), P50: pct(0.50), P99: pct(0.99),
	}
}

// parallel runs n calls of f on workers goroutines (setup work).
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	_, err := measureCount(ctx, workers, n, func(ctx context.Context, _, i int) error { return f(ctx, i) })
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// cellProfile (-cell-cpuprofile), when set, is the file name prefix of a
// CPU profile of each measured cell's window alone (not its warm-up):
// <prefix>.<series>.<callers>, the series' name (with its round, " rN",
// when measured in rounds) with every run of other characters than
// letters and digits as one "-". Timed (measureFor) and counted
// (measureCountAs: the hot account, Begin new at a ledger size) cells
// alike.
var cellProfile string

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

func cellProfilePath(series string, callers int) string {
	if cellProfile == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%d", cellProfile, strings.Trim(nonWord.ReplaceAllString(series, "-"), "-"), callers)
}
