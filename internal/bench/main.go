// Command bench is Portcullis's side-by-side suite: in one run it measures
// the raw JetStream ceiling the way the ledger uses it, a Postgres 15
// idempotency table (started here, synchronous_commit=on), Redis SET NX
// (started here, no persistence) as the non-durable reference, and
// Portcullis Begin, attach, Reserve and MCP tools/call, in-process and
// over Connect, at several numbers of concurrent callers. It prints each
// result and each ratio against its target, and writes results.json,
// report.md and SVG plots to -out.
//
//	go run ./internal/bench -out docs/bench
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/pgtest"
	"github.com/portcullis-dev/portcullis/server"
)

// Report is everything one run measured.
type Report struct {
	Date     string       `json:"date"`
	Commit   string       `json:"commit"`
	Machine  string       `json:"machine"`
	Command  string       `json:"command"`
	LoadFrom string       `json:"load_start"`
	LoadTo   string       `json:"load_end"`
	Rounds   int          `json:"rounds"` // of the side-by-side cells (-rounds)
	Cells    []Cell       `json:"cells"`
	Scale    []ScalePoint `json:"scale,omitempty"`
	Checks   []Check      `json:"checks"`
}

func main() {
	if err := run(); err != nil {
		fatal(err)
	}
}

func run() error {
	server.TuneGC(slog.New(slog.DiscardHandler)) // the suite hosts its gateways as `portcullis serve` runs one
	out := flag.String("out", "docs/bench", "directory for results.json, report.md and the SVG plots")
	dur := flag.Duration("dur", 3*time.Second, "measured time per cell")
	rounds := flag.Int("rounds", 1, "rounds of the side-by-side cells: each round measures every series at every caller count, one caller count after another with its series back to back (compared cells are seconds apart, not minutes); a cell reports the median of its rounds, results.json every round")
	warm := flag.Duration("warm", 500*time.Millisecond, "unmeasured warm-up per cell")
	callersFlag := flag.String("callers", "1,4,16,64,256", "concurrent callers per cell")
	only := flag.String("only", "", "run only series matching this regexp")
	hot := flag.String("hot", "1000", "closed operations on the hot account before measuring (comma-separated)")
	hotOps := flag.Int("hot-ops", 1000, "reserve+settle operations measured per hot-account cell")
	shards := flag.Int("shards", 4, "streams of the sharded raw ceiling")
	flag.IntVar(&execShards, "exec-shards", 0, "execution shards of every gateway's ledger (0: a new ledger's default)")
	abShards := flag.Int("ab-shards", 4, "execution shards of the A/B series \"Begin new, in-process, N exec shards\" (0: none)")
	scaleFlag := flag.String("scale", "10000,1000000", "executions indexed before each \"decision latency\" series (comma-separated)")
	scaleCallers := flag.String("scale-callers", "1,16", "concurrent callers of the decision latency cells")
	scaleLoad := flag.Int("scale-load-callers", 256, "concurrent callers that fill the ledger before the decision latency cells")
	flag.StringVar(&scaleMemProfile, "scale-memprofile", "", "write a heap profile at each scale point's memory reading to this file name, suffixed .<executions>")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&cellProfile, "cell-cpuprofile", "", "write a CPU profile of each measured cell's window to this file name, suffixed .<series>.<callers>, the series marked -rN with -rounds (not with -cpuprofile)")
	traceOut := flag.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	flag.Parse()
	if *cpuProfile != "" && cellProfile != "" {
		return errors.New("-cpuprofile and -cell-cpuprofile: one CPU profile at a time")
	}
	// The profiles' and trace's directories, made before the first cell
	// rather than found missing after it (-out is made when the report is written).
	for _, f := range []string{*cpuProfile, cellProfile, scaleMemProfile, *traceOut} {
		if f != "" {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				return err
			}
		}
	}
	stopTrace, err := record(*traceOut, trace.Start, trace.Stop)
	if err != nil {
		return err
	}
	defer stopTrace()
	stopProfile, err := record(*cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	callers, err := ints(*callersFlag)
	if err != nil {
		return err
	}
	hots, err := ints(*hot)
	if err != nil {
		return err
	}
	scales, err := ints(*scaleFlag)
	if err != nil {
		return err
	}
	scaleCs, err := ints(*scaleCallers)
	if err != nil {
		return err
	}
	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	ctx := context.Background()
	// A closed stdout (| head) must not kill the suite before it stops
	// the servers it started; Ctrl-C stops them too.
	signal.Ignore(syscall.SIGPIPE)
	var stopMu sync.Mutex
	var stops []func()
	onStop := func(f func()) { stopMu.Lock(); stops = append(stops, f); stopMu.Unlock() }
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		stopMu.Lock()
		for _, f := range stops {
			f()
		}
		os.Exit(130)
	}()
	rep := &Report{
		Date: time.Now().UTC().Format(time.RFC3339), Commit: gitCommit(), Machine: machine(),
		Command: "go run ./internal/bench " + strings.Join(os.Args[1:], " "), LoadFrom: loadavg(),
	}

	var pg *pgtest.Server
	var rd *redisServer
	want := func(s string) bool { return filter == nil || filter.MatchString(s) }
	if want(seriesPG) || want(seriesPGAttach) {
		if pg, err = pgtest.Run(); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer pg.Stop()
		onStop(pg.Stop)
	}
	if want(seriesRedis) {
		if rd, err = startRedis(ctx); err != nil {
			return err
		}
		defer rd.stop()
		onStop(rd.stop)
	}

	type suite struct {
		series string
		unit   string
		w      workload
	}
	var suites []suite
	add := func(series, unit string, w func() workload) {
		if want(series) {
			suites = append(suites, suite{series, unit, w()})
		}
	}
	add(seriesRaw1, "appends/s", func() workload { return rawCeiling(1, benchkit.Grouped) })
	add(seriesRaw1Plain, "appends/s", func() workload { return rawCeiling(1, benchkit.Plain) })
	add(seriesRawN(*shards), "appends/s", func() workload { return rawCeiling(*shards, benchkit.Grouped) })
	add(seriesRawNPlain(*shards), "appends/s", func() workload { return rawCeiling(*shards, benchkit.Plain) })
	add(seriesPG, "decisions/s", func() workload { return postgresTable(pg) })
	add(seriesPGAttach, "decisions/s", func() workload { return postgresAttach(pg) })
	add(seriesRedis, "decisions/s", func() workload { return redisSetNX(rd) })
	add(seriesBegin, "decisions/s", func() workload { return beginNew(false) })
	add(seriesBeginConnect, "decisions/s", func() workload { return beginNew(true) })
	if *abShards > 0 {
		add(seriesBeginShards(*abShards), "decisions/s", func() workload { return beginNewShards(*abShards) })
	}
	add(seriesAttach, "decisions/s", func() workload { return beginAttach(false) })
	add(seriesAttachConnect, "decisions/s", func() workload { return beginAttach(true) })
	add(seriesReserve, "reserve+settle/s", func() workload { return reserveSpread(false) })
	add(seriesReserveConnect, "reserve+settle/s", func() workload { return reserveSpread(true) })
	add(seriesMCPDirect, "calls/s", func() workload { return mcpDirect })
	add(seriesMCP, "calls/s", func() workload { return mcpPortcullis(latestMCP) })
	add(seriesMCPSession, "calls/s", func() workload { return mcpPortcullis(sessionMCP) })

	if *rounds < 1 {
		return errors.New("-rounds: at least 1")
	}
	rep.Rounds = *rounds
	fmt.Printf("%-28s %7s %12s %9s %9s %8s %9s %6s\n", "series", "callers", "rate", "p50 ms", "p99 ms", "ops", "cpu µs/op", "cores")
	measured := map[cellKey][]Cell{}
	for r := 1; r <= *rounds; r++ {
		if *rounds > 1 && len(suites) > 0 {
			fmt.Printf("round %d of %d\n", r, *rounds)
		}
		for _, c := range callers {
			for _, s := range suites {
				label := roundLabel(s.series, r-1, *rounds)
				op, done, err := s.w(ctx, c)
				if err != nil {
					return fmt.Errorf("%s callers=%d: %w", s.series, c, err)
				}
				cell, err := measureFor(ctx, label, c, *warm, *dur, op)
				done()
				if err != nil {
					return fmt.Errorf("%s callers=%d: %w", s.series, c, err)
				}
				cell.Series, cell.Unit = s.series, s.unit
				printCell(cell)
				k := cellKey{s.series, c}
				measured[k] = append(measured[k], cell)
			}
		}
	}
	if *rounds > 1 && len(suites) > 0 {
		fmt.Printf("\nmedians of %d rounds\n", *rounds)
	}
	for _, s := range suites {
		for _, c := range callers {
			rep.Cells = append(rep.Cells, roundsMedian(measured[cellKey{s.series, c}]))
		}
	}
	var hotPoints []int
	for _, h := range hots {
		if want(seriesHot(h)) {
			hotPoints = append(hotPoints, h)
		}
	}
	hotCells, err := hotSeries(ctx, hotPoints, *hotOps, *rounds)
	if err != nil {
		return err
	}
	rep.Cells = append(rep.Cells, hotCells...)
	var scalePoints []int
	for _, n := range scales {
		if want(seriesScaleN(n)) {
			scalePoints = append(scalePoints, n)
		}
	}
	if len(scalePoints) > 0 {
		points, cells, err := scaleSeries(ctx, scalePoints, *scaleLoad, scaleCs, *warm, *dur, *rounds)
		if err != nil {
			return err
		}
		rep.Scale = points
		rep.Cells = append(rep.Cells, cells...)
	}
	rep.LoadTo = loadavg()
	rep.Checks = checks(rep.Cells, *shards, hots)
	rep.Checks = append(rep.Checks, scaleChecks(rep.Cells, scales, scaleCs)...)
	fmt.Println()
	for _, c := range rep.Checks {
		fmt.Println(c.line())
	}
	if err := write(*out, rep, *shards); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s\n", *out)
	return nil
}

// Series names.
const (
	seriesRaw1           = "raw ceiling, 1 stream"
	seriesRaw1Plain      = "raw plain CAS, 1 stream"
	seriesPG             = "postgres table"
	seriesPGAttach       = "postgres table, attach"
	seriesRedis          = "redis SET NX"
	seriesBegin          = "Begin new, in-process"
	seriesBeginConnect   = "Begin new, Connect"
	seriesAttach         = "attach, in-process"
	seriesAttachConnect  = "attach, Connect"
	seriesReserve        = "Reserve, in-process"
	seriesReserveConnect = "Reserve, Connect"
	seriesMCPDirect      = "tools/call, direct MCP"
	seriesMCP            = "tools/call, Portcullis"
	seriesMCPSession     = "tools/call, Portcullis, 2025-11-25 session"
)

func seriesRawN(n int) string { return fmt.Sprintf("raw ceiling, %d streams", n) }

// seriesBeginShards is Begin new, in-process, on a ledger of n execution
// shards (the A/B against seriesBegin).
func seriesBeginShards(n int) string { return fmt.Sprintf("Begin new, in-process, %d exec shards", n) }
func seriesRawNPlain(n int) string   { return fmt.Sprintf("raw plain CAS, %d streams", n) }
func seriesHot(n int) string         { return fmt.Sprintf("hot account, %d closed", n) }

// settleBudgetViews waits (at most 3 min) until every gateway's views hold
// the same budget stream sequence twice in a row, 100 ms apart, and their
// Pebble has no compaction running or due.
func settleBudgetViews(ctx context.Context, gs []*gw) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last uint64
	for same := 0; same < 2; {
		seq := gs[0].Views.BudgetApplied()
		for _, g := range gs[1:] {
			if g.Views.BudgetApplied() != seq {
				seq = 0
			}
		}
		if seq != 0 && seq == last {
			same++
		} else {
			same = 0
		}
		last = seq
		select {
		case <-ctx.Done():
			return fmt.Errorf("budget views did not settle: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, g := range gs {
		if _, _, err := g.Views.Settle(ctx); err != nil {
			return err
		}
	}
	runtime.GC()
	return nil
}

func printCell(c Cell) {
	fmt.Printf("%-28s %7d %12.0f %9.2f %9.2f %8d %9.0f %6.2f  %s\n", c.Series, c.Callers, c.Rate, c.P50, c.P99, c.Ops, c.CPUPerOp, c.Cores, c.Unit)
}

// roundLabel is series marked with round r (from 0) when there are
// several: what a round's cell prints as and its CPU profile is named by.
func roundLabel(series string, r, rounds int) string {
	if rounds > 1 {
		return fmt.Sprintf("%s r%d", series, r+1)
	}
	return series
}

// printRound prints round r's (from 0) cell of a series measured in
// rounds, its series marked with the round.
func printRound(c Cell, r, rounds int) {
	c.Series = roundLabel(c.Series, r, rounds)
	printCell(c)
}

// roundsMedian is a cell's median over its rounds (medianCell), printed
// when there were several.
func roundsMedian(rounds []Cell) Cell {
	c := medianCell(rounds)
	if len(rounds) > 1 {
		printCell(c)
	}
	return c
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(out))
	if st, _ := exec.Command("git", "status", "--porcelain").Output(); len(st) > 0 {
		s += " (with uncommitted changes)"
	}
	return s
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %d GiB", (kb+(1<<19))>>20)
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func write(dir string, rep *Report, shards int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	ps := plots(rep.Cells, shards)
	ps["scale.svg"] = scalePlot(rep)
	for name, p := range ps {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(p), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(markdown(rep, shards)), 0o644)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// record starts a recording of the whole run (a CPU profile, an execution
// trace) into the file path, when path is set; the returned func stops it
// and closes the file.
func record(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { stop(); f.Close() }, nil
}
