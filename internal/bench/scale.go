package main

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nuid"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// ScalePoint is what the scale series measured at one ledger size: how
// fast the ledger was filled, and the process's memory and the disk the
// views and the JetStream store take once it holds Executions.
type ScalePoint struct {
	Executions int `json:"executions"`
	// Load: Executions real Begins (new intents) at LoadCallers callers,
	// and the wait for the projector to apply them all.
	LoadCallers   int     `json:"load_callers"`
	LoadSeconds   float64 `json:"load_seconds"`
	LoadRate      float64 `json:"load_rate"` // Begins/s over LoadSeconds
	LoadCPUPerOp  float64 `json:"load_cpu_us_per_op"`
	CatchUpSecond float64 `json:"catch_up_seconds"` // after the last Begin returned
	// Settle: after the catch-up, the wait (at most settleMax) until the
	// views' Pebble had no compaction running and none to pick (Views.Settle), so
	// the latency cells measure a steady ledger, not the bulk load's
	// compactions. SettleDebtBytes is the debt the load left (Pebble's
	// estimate when the wait began); Settled is false when the bound ran out.
	SettleSeconds   float64 `json:"settle_seconds"`
	SettleDebtBytes uint64  `json:"settle_debt_bytes"`
	Settled         bool    `json:"settled"`
	// Memory of this process after a GC (runtime.GC, debug.FreeOSMemory):
	// the suite's callers, the gateway and its embedded NATS server, the
	// Pebble views (block cache and memtables). Base* is the same reading
	// just before the gateway started.
	HeapInuse     uint64 `json:"heap_inuse_bytes"`
	RSS           uint64 `json:"rss_bytes"`
	HeapInuseBase uint64 `json:"heap_inuse_base_bytes"`
	RSSBase       uint64 `json:"rss_base_bytes"`
	// Disk: the Pebble views directory (SSTs, WAL, manifest) and the
	// JetStream store directory, after the projector caught up.
	PebbleBytes    int64 `json:"pebble_bytes"`
	JetStreamBytes int64 `json:"jetstream_bytes"`
}

func perMillion(v float64, n int) float64 { return v / float64(n) * 1e6 }

// seriesScaleN names the scale series at one ledger size (what -only matches).
func seriesScaleN(n int) string {
	return fmt.Sprintf("decision latency, %s executions", human(float64(n)))
}

// seriesScale names the latency cells of one ledger size and operation.
func seriesScale(n int, op string) string { return seriesScaleN(n) + ", " + op }

const (
	scaleNew = "Begin new"
	// A retry of one of the last scaleRecent executions loaded: retries
	// come within a tool's match window (minutes to an hour), so of the
	// recent executions. The target is on this one and Begin new.
	scaleRecent = "attach, recent"
	// A retry of any of the n, uniformly: information (a retry of an old
	// execution pays a cold read of its subject in the JetStream store).
	scaleAny = "attach, any"
)

// scaleRecentN is how many of the last executions loaded "attach, recent"
// retries.
const scaleRecentN = 10000

// settleMax bounds the wait for the views' compactions after the load.
const settleMax = 3 * time.Minute

// scaleNewOps is how many Begins a "Begin new" cell times, after
// scaleNewWarm untimed: each adds an execution, so these cells run a
// count, not -dur, or the smallest ledger (10 000) would grow by several
// times its size over the rounds.
const (
	scaleNewOps  = 1000
	scaleNewWarm = 100
)

// scaleLedger is one point of the scale series: a gateway of its own whose
// ledger holds n executions of one run (keys handed out in order), its
// views settled, its memory and disk read.
type scaleLedger struct {
	p     ScalePoint
	g     *gw
	run   string
	added int // executions the Begin new cells added since the load
}

// loadScale starts a gateway, fills its ledger with n executions at
// loadCallers callers, waits for the views to catch up and settle, and
// reads memory and disk.
func loadScale(ctx context.Context, n, loadCallers int) (_ *scaleLedger, err error) {
	l := &scaleLedger{p: ScalePoint{Executions: n, LoadCallers: loadCallers}, run: "run:" + nuid.Next()}
	p := &l.p
	p.HeapInuseBase, p.RSSBase = memory()
	if l.g, err = startGW(ctx, ledgerConfig, nil, ""); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.g.close()
		}
	}()
	load := beginOp(l.g, false, l.run, eachNew, pb.Decision_DECISION_NEW)
	t0 := time.Now()
	lc, err := measureCount(ctx, loadCallers, n, load)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	t1 := time.Now()
	if err := catchUp(ctx, l.g); err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	p.LoadSeconds, p.LoadRate, p.LoadCPUPerOp = t1.Sub(t0).Seconds(), lc.Rate, lc.CPUPerOp
	p.CatchUpSecond = time.Since(t1).Seconds()
	fmt.Printf("%-28s loaded %d executions in %.1f s (%.0f Begins/s at %d callers, %.0f µs CPU each), views caught up %.1f s later\n",
		seriesScale(n, "load"), n, p.LoadSeconds, p.LoadRate, loadCallers, p.LoadCPUPerOp, p.CatchUpSecond)
	t2 := time.Now()
	sctx, cancel := context.WithTimeout(ctx, settleMax)
	debt, last, err := l.g.Views.Settle(sctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	p.SettleSeconds, p.SettleDebtBytes, p.Settled = time.Since(t2).Seconds(), debt.DebtBytes, err == nil
	fmt.Printf("%-28s views settled in %.1f s (when the wait began: compaction debt %s, %d compactions running, top score %.2f; at its end: %s, %d, %.2f; settled: %v)\n",
		seriesScale(n, "settle"), p.SettleSeconds, mib(float64(debt.DebtBytes)), debt.InProgress, debt.MaxScore,
		mib(float64(last.DebtBytes)), last.InProgress, last.MaxScore, p.Settled)
	dataDir := filepath.Join(l.g.dir, "data")
	if p.PebbleBytes, err = dirSize(filepath.Join(dataDir, "views")); err != nil {
		return nil, err
	}
	if p.JetStreamBytes, err = dirSize(filepath.Join(dataDir, "jetstream")); err != nil {
		return nil, err
	}
	p.HeapInuse, p.RSS = memory()
	if scaleMemProfile != "" {
		if err := writeHeapProfile(fmt.Sprintf("%s.%d", scaleMemProfile, n)); err != nil {
			return nil, err
		}
	}
	fmt.Printf("%-28s heap in use %s, RSS %s (before this gateway: %s, %s); Pebble views %s, JetStream store %s (%s and %s per million executions)\n",
		seriesScale(n, "memory"), mib(float64(p.HeapInuse)), mib(float64(p.RSS)), mib(float64(p.HeapInuseBase)), mib(float64(p.RSSBase)),
		mib(float64(p.PebbleBytes)), mib(float64(p.JetStreamBytes)),
		mib(perMillion(float64(p.PebbleBytes), n)), mib(perMillion(float64(p.JetStreamBytes), n)))
	return l, nil
}

// measure times op on this ledger at callers: Begin new a fixed count
// (scaleNewOps), the attaches for dur after warm.
func (l *scaleLedger) measure(ctx context.Context, op string, callers int, warm, dur time.Duration, label string) (Cell, error) {
	n := l.p.Executions
	var cell Cell
	var err error
	switch op {
	case scaleNew:
		// A new intent (of a run of its own per cell): the Service looks the
		// intent up in the index, decides NEW and appends.
		begin := beginOp(l.g, false, "run:"+nuid.Next(), eachNew, pb.Decision_DECISION_NEW)
		warmN := max(scaleNewWarm, callers)
		if _, err = measureCount(ctx, callers, warmN, begin); err != nil {
			return Cell{}, err
		}
		cell, err = measureCountAs(ctx, label, callers, scaleNewOps, func(ctx context.Context, c, i int) error { return begin(ctx, c, warmN+i) })
		l.added += warmN + scaleNewOps
	case scaleRecent:
		// A retry of one of the last scaleRecentN loaded (keys are handed
		// out in order, so these are the last loaded), at random.
		r := min(n, scaleRecentN)
		cell, err = measureFor(ctx, label, callers, warm, dur,
			beginOp(l.g, false, l.run, func(_, _ int) int { return n - r + rand.IntN(r) }, pb.Decision_DECISION_ATTACHED))
	case scaleAny:
		// A retry of one of the n loaded intents, uniformly at random, so
		// the lookups are spread over the whole index, not cache-hot.
		cell, err = measureFor(ctx, label, callers, warm, dur,
			beginOp(l.g, false, l.run, func(_, _ int) int { return rand.IntN(n) }, pb.Decision_DECISION_ATTACHED))
	default:
		return Cell{}, fmt.Errorf("unknown scale operation %q", op)
	}
	if err != nil {
		return Cell{}, err
	}
	cell.Series, cell.Unit = seriesScale(n, op), "decisions/s"
	return cell, nil
}

// scaleOps are the operations the scale series times on every ledger size.
var scaleOps = []string{scaleNew, scaleRecent, scaleAny}

// scaleSeries measures each ledger size in turn on a gateway of its own
// (closed before the next size loads): it loads it, then measures Begin
// new, attach recent and attach any at each caller count, in rounds (each
// round every operation and caller count once); a cell is the median of
// its rounds. The sizes are not interleaved: a gateway holding a million
// executions beside the smaller one made the smaller one's cells 20–40 %
// slower (its gigabyte of heap is the process's), which is not the
// smaller ledger a user runs.
func scaleSeries(ctx context.Context, scales []int, loadCallers int, callers []int, warm, dur time.Duration, rounds int) ([]ScalePoint, []Cell, error) {
	var points []ScalePoint
	var cells []Cell
	for _, n := range scales {
		l, err := loadScale(ctx, n, loadCallers)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", seriesScaleN(n), err)
		}
		cs, err := l.cells(ctx, callers, warm, dur, rounds)
		l.g.close()
		if err != nil {
			return nil, nil, err
		}
		points = append(points, l.p)
		cells = append(cells, cs...)
	}
	return points, cells, nil
}

// cells measures every operation at each caller count in rounds and
// returns each cell's median over its rounds.
func (l *scaleLedger) cells(ctx context.Context, callers []int, warm, dur time.Duration, rounds int) ([]Cell, error) {
	n := l.p.Executions
	measured := map[cellKey][]Cell{}
	for r := range rounds {
		for _, op := range scaleOps {
			for _, c := range callers {
				runtime.GC()
				series := seriesScale(n, op)
				cell, err := l.measure(ctx, op, c, warm, dur, roundLabel(series, r, rounds))
				if err != nil {
					return nil, fmt.Errorf("%s callers=%d: %w", series, c, err)
				}
				printRound(cell, r, rounds)
				k := cellKey{series, c}
				measured[k] = append(measured[k], cell)
			}
		}
	}
	var out []Cell
	for _, op := range scaleOps {
		for _, c := range callers {
			k := cellKey{seriesScale(n, op), c}
			for i := range measured[k] {
				measured[k][i].Note = fmt.Sprintf("ledger of %d executions loaded, %d after the last Begin new cell", n, n+l.added)
			}
			out = append(out, roundsMedian(measured[k]))
		}
	}
	return out, nil
}

// scaleMemProfile (-scale-memprofile), when set, is where each ledger
// size's heap profile goes (suffixed with the size), taken with the
// memory reading.
var scaleMemProfile string

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

// catchUp waits until the views hold every event each execution lane's
// stream holds now.
func catchUp(ctx context.Context, g *gw) error {
	lanes := g.ExecutionLanes
	if len(lanes) == 0 {
		lanes = []ledger.Lane{{Log: g.ExecutionsLog, WaitFor: g.Views.WaitFor}}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, l := range lanes {
		seq, err := l.Log.LastSeq(ctx)
		if err != nil {
			return err
		}
		if err := l.WaitFor(ctx, seq); err != nil {
			return err
		}
	}
	return nil
}

// memory is this process's Go heap in use and resident set after a GC
// that returns freed memory to the OS.
func memory() (heapInuse, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, rssBytes()
}

// rssBytes is VmRSS of /proc/self/status (0 where there is none).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a file removed while walking (compaction)
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// own is a reading less the one before the gateway started: the
// gateway's own memory.
func own(v, base uint64) float64 { return float64(v) - float64(base) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// scaleChecks: decision latency within 1.5× from the smallest to the
// largest ledger measured (issue 10: 10k to 1M executions), for Begin new
// and attach recent; the value is the worst p50 ratio over the callers
// measured. Attach any gets a check of its own ratio, as information: it
// always passes, and its detail says so.
func scaleChecks(cells []Cell, scales, callers []int) []Check {
	lo, hi := 0, 0
	for _, n := range scales {
		if lo == 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	var out []Check
	for _, op := range scaleOps {
		info := op == scaleAny
		c := Check{Name: fmt.Sprintf("decision latency (%s p50), %s / %s executions indexed", op, human(float64(hi)), human(float64(lo))), Target: "≤ 1.5", Info: info}
		var detail []string
		switch {
		case info:
			c.Target = "none"
			detail = append(detail, fmt.Sprintf("information, not the target: a retry of any of the executions, uniformly (the target is on Begin new and on %q, a retry of one of the last %d)", scaleRecent, scaleRecentN))
		case op == scaleRecent:
			detail = append(detail, fmt.Sprintf("a retry of one of the last %d executions loaded", scaleRecentN))
		}
		for _, k := range callers {
			a, ok1 := find(cells, seriesScale(hi, op), k)
			b, ok2 := find(cells, seriesScale(lo, op), k)
			if !ok1 || !ok2 || lo == hi || b.P50 <= 0 || b.P99 <= 0 {
				continue
			}
			r := a.P50 / b.P50
			if !c.Measured || r > c.Value {
				c.Value = r
			}
			c.Measured = true
			detail = append(detail, fmt.Sprintf("%d callers: p50 %.2f vs %.2f ms, p99 %.2f vs %.2f ms (%.2f×)", k, a.P50, b.P50, a.P99, b.P99, a.P99/b.P99))
		}
		c.Pass = c.Measured && !info && c.Value <= 1.5
		c.Detail = strings.Join(detail, "; ")
		out = append(out, c)
	}
	return out
}

// scalePlot: p50 and p99 of Begin new and the attaches against the
// executions the ledger holds.
func scalePlot(rep *Report) string {
	lines := map[string][]pt{}
	var present []string
	for _, op := range scaleOps {
		for _, pct := range []string{"p50", "p99"} {
			for _, c := range rep.Cells {
				for _, p := range rep.Scale {
					if c.Series != seriesScale(p.Executions, op) {
						continue
					}
					s := fmt.Sprintf("%s, %d callers, %s", op, c.Callers, pct)
					v := c.P50
					if pct == "p99" {
						v = c.P99
					}
					if v <= 0 {
						continue
					}
					if len(lines[s]) == 0 {
						present = append(present, s)
					}
					lines[s] = append(lines[s], pt{p.Executions, v})
				}
			}
		}
	}
	slices.SortStableFunc(present, func(a, b string) int { return strings.Compare(a, b) })
	return draw("Decision latency against executions indexed", "ms (log)", "executions in the ledger", present, lines,
		func(s string) bool { return strings.HasSuffix(s, "p99") })
}

// scaleMarkdown is the report's section on the scale series.
func scaleMarkdown(rep *Report) string {
	if len(rep.Scale) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Scale: executions indexed\n\n")
	b.WriteString("Each ledger size on a fresh gateway of its own (closed before the next size loads), filled with real Begins (new intents); the latency cells are the \"decision latency\" rows below, " +
		"measured in rounds after the load (each round every operation and caller count once), a cell the median of its rounds. " +
		"Begin new cells time a fixed count of Begins (so the ledger grows by little; each cell's note gives its size after them). " +
		"Memory is this process's after a GC (the suite's callers, the gateway, its embedded NATS server and the Pebble views all run in it; the growth below compares each gateway's own memory, its reading less the one before it started); " +
		"disk is the views' Pebble directory and the JetStream store directory after the settle. " +
		"Settle is the wait after the catch-up until the views' Pebble had no compaction running and none to pick (debt: Pebble's estimate when the wait began, what the load left), before the latency cells.\n\n")
	b.WriteString("| executions | load Begins/s (callers) | CPU µs/Begin | catch-up s | settle s (debt) | heap in use | RSS | heap / RSS before the gateway | Pebble views | per million | JetStream store | per million |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range rep.Scale {
		settle := fmt.Sprintf("%.1f (%s)", p.SettleSeconds, mib(float64(p.SettleDebtBytes)))
		if !p.Settled {
			settle += ", not settled"
		}
		fmt.Fprintf(&b, "| %d | %.0f (%d) | %.0f | %.1f | %s | %s | %s | %s / %s | %s | %s | %s | %s |\n", p.Executions, p.LoadRate, p.LoadCallers, p.LoadCPUPerOp, p.CatchUpSecond, settle,
			mib(float64(p.HeapInuse)), mib(float64(p.RSS)), mib(float64(p.HeapInuseBase)), mib(float64(p.RSSBase)),
			mib(float64(p.PebbleBytes)), mib(perMillion(float64(p.PebbleBytes), p.Executions)),
			mib(float64(p.JetStreamBytes)), mib(perMillion(float64(p.JetStreamBytes), p.Executions)))
	}
	if len(rep.Scale) >= 2 {
		a, z := rep.Scale[0], rep.Scale[len(rep.Scale)-1]
		if d := z.Executions - a.Executions; d != 0 {
			fmt.Fprintf(&b, "\nGrowth from %d to %d executions, per million executions: heap in use %s, RSS %s, Pebble %s, JetStream %s.\n",
				a.Executions, z.Executions,
				mib(perMillion(own(z.HeapInuse, z.HeapInuseBase)-own(a.HeapInuse, a.HeapInuseBase), d)), mib(perMillion(own(z.RSS, z.RSSBase)-own(a.RSS, a.RSSBase), d)),
				mib(perMillion(float64(z.PebbleBytes-a.PebbleBytes), d)), mib(perMillion(float64(z.JetStreamBytes-a.JetStreamBytes), d)))
		}
	}
	b.WriteString("\n")
	return b.String()
}
