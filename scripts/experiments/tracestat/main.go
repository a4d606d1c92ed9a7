// Command tracestat reads an execution trace (go tool trace's input, such as
// internal/bench -trace writes) and prints where the process's processors
// went: per 100 ms window how many goroutines ran on average, how much of the
// window had runnable goroutines while fewer than -procs ran, and how much
// had none running at all; then, per kind of goroutine (named by the first
// frame of its stacks that matches -names), its time running, in system
// calls, runnable and waiting; and how much of the starved time fell while a
// goroutine named by -syscall (the stream loop) was in a system call.
//
// With -timeline FROM,SPAN (milliseconds from the trace's start) it prints
// instead every goroutine state change in that window, one a line: when (µs
// into the window), which goroutine, from and to which state, why, and the
// first frames outside the runtime of the goroutine's stack and of the stack
// that caused the change. With -wakes it prints instead, per waker (the
// first frames of the stack that made a goroutine runnable), how long the
// woken goroutines waited for a processor, and per call site how long the
// system calls took: count, p50, p90 and mean. One append of one caller
// reads off both (docs/performance.md, "One append at one caller, step by
// step").
//
// It is its own module (golang.org/x/exp/trace is not a dependency of
// Portcullis): go run . -procs 2 /tmp/b64.trace
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	procs := flag.Int("procs", 2, "processors (cores) the traced process had")
	window := flag.Duration("window", 100*time.Millisecond, "width of a timeline window")
	inSyscall := flag.String("syscall", "internalLoop", "part of a function name: report the starved time while such a goroutine is in a system call")
	names := flag.String("names", "internalLoop,committer,measureFor,fedTail,readLoop,flusher", "comma-separated parts of function names that name a goroutine")
	timeline := flag.String("timeline", "", "FROM,SPAN in milliseconds: print the goroutine state changes in this window instead")
	wakes := flag.Bool("wakes", false, "print wake-up waits per waker and system call times per call site instead")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatal("usage: tracestat [flags] TRACE")
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		log.Fatal(err)
	}
	if *timeline != "" {
		var from, span float64
		if _, err := fmt.Sscanf(*timeline, "%g,%g", &from, &span); err != nil {
			log.Fatalf("-timeline %q: want FROM,SPAN in milliseconds", *timeline)
		}
		if err := printTimeline(os.Stdout, r, from, span); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *wakes {
		if err := printWakes(os.Stdout, r); err != nil {
			log.Fatal(err)
		}
		return
	}
	s := newStats(*procs, trace.Time(*window), strings.Split(*names, ","))
	s.syscallName = *inSyscall
	if err := goTransitions(r, s.transition); err != nil {
		log.Fatal(err)
	}
	s.print(os.Stdout)
}

// goTransitions calls fn for every goroutine state change in the trace, in
// order, with the time of the trace's first event.
func goTransitions(r *trace.Reader, fn func(first trace.Time, ev trace.Event, st trace.StateTransition)) error {
	var first trace.Time
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if first == 0 {
			first = ev.Time()
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		if st := ev.StateTransition(); st.Resource.Kind == trace.ResourceGoroutine {
			fn(first, ev, st)
		}
	}
}

// goroutine is what is known of one goroutine: its name and time per state.
type goroutine struct {
	name  string
	since trace.Time
	in    map[trace.GoState]trace.Time
}

// stats integrates the counts of running and runnable goroutines over time.
type stats struct {
	procs   int
	width   trace.Time
	names   []string
	gs      map[trace.GoID]*goroutine
	first   trace.Time
	last    trace.Time
	running int
	ready   int
	// goroutines named by syscallName in a system call now, and the
	// starved time while there was one
	syscallName    string
	inSyscall      int
	starvedSyscall trace.Time
	// per window: goroutine-time running, time with work waiting for a
	// processor (ready > 0, running < procs), time with nothing running
	busy, starved, idle map[int]trace.Time
}

func newStats(procs int, width trace.Time, names []string) *stats {
	return &stats{procs: procs, width: width, names: names, gs: map[trace.GoID]*goroutine{},
		busy: map[int]trace.Time{}, starved: map[int]trace.Time{}, idle: map[int]trace.Time{}}
}

// transition integrates the counts up to this state change, then applies it.
func (s *stats) transition(first trace.Time, ev trace.Event, st trace.StateTransition) {
	s.first = first
	now := ev.Time()
	if s.last != 0 {
		d, w := now-s.last, int((s.last-s.first)/s.width)
		s.busy[w] += trace.Time(s.running) * d
		if s.running < s.procs && s.ready > 0 {
			s.starved[w] += d
			if s.inSyscall > 0 {
				s.starvedSyscall += d
			}
		}
		if s.running == 0 {
			s.idle[w] += d
		}
	}
	s.last = now
	from, to := st.Goroutine()
	s.count(from, -1)
	s.count(to, 1)

	id := st.Resource.Goroutine()
	g := s.gs[id]
	if g == nil {
		g = &goroutine{in: map[trace.GoState]trace.Time{}}
		s.gs[id] = g
	}
	if g.since != 0 {
		g.in[from] += now - g.since
	}
	g.since = now
	if g.name == "" {
		g.name = s.nameOf(st.Stack)
	}
	if s.syscallName != "" && strings.Contains(g.name, s.syscallName) {
		if from == trace.GoSyscall {
			s.inSyscall--
		}
		if to == trace.GoSyscall {
			s.inSyscall++
		}
	}
}

func (s *stats) count(state trace.GoState, n int) {
	switch state {
	case trace.GoRunning:
		s.running += n
	case trace.GoRunnable:
		s.ready += n
	}
}

func (s *stats) nameOf(stack trace.Stack) string {
	for fr := range stack.Frames() {
		for _, n := range s.names {
			if strings.Contains(fr.Func, n) {
				return fr.Func
			}
		}
	}
	return ""
}

func (s *stats) print(w io.Writer) {
	secs := func(t trace.Time) float64 { return float64(t) / 1e9 }
	fmt.Fprintf(w, "trace %.3f s; per %v window: processors busy (goroutines running, mean), share of the window with goroutines runnable while fewer than %d ran, share with none running\n",
		secs(s.last-s.first), time.Duration(s.width), s.procs)
	var sum [3]float64
	n := int((s.last-s.first)/s.width) + 1
	for i := range n {
		b, st, id := float64(s.busy[i])/float64(s.width), float64(s.starved[i])/float64(s.width), float64(s.idle[i])/float64(s.width)
		fmt.Fprintf(w, "%3d  busy %.2f  starved %.2f  idle %.2f\n", i, b, st, id)
		sum[0], sum[1], sum[2] = sum[0]+b, sum[1]+st, sum[2]+id
	}
	fmt.Fprintf(w, "mean busy %.2f  starved %.2f  idle %.2f\n", sum[0]/float64(n), sum[1]/float64(n), sum[2]/float64(n))
	var starved trace.Time
	for _, t := range s.starved {
		starved += t
	}
	fmt.Fprintf(w, "starved %.3f s, of it %.3f s while a %s goroutine was in a system call\n\n", secs(starved), secs(s.starvedSyscall), s.syscallName)

	type row struct {
		name string
		n    int
		in   map[trace.GoState]trace.Time
	}
	rows := map[string]*row{}
	for _, g := range s.gs {
		name := g.name
		if name == "" {
			name = "(other)"
		}
		r := rows[name]
		if r == nil {
			r = &row{name: name, in: map[trace.GoState]trace.Time{}}
			rows[name] = r
		}
		r.n++
		for k, v := range g.in {
			r.in[k] += v
		}
	}
	sorted := make([]*row, 0, len(rows))
	for _, r := range rows {
		sorted = append(sorted, r)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].in[trace.GoRunning] > sorted[j].in[trace.GoRunning] })
	fmt.Fprintln(w, "seconds summed over goroutines: running  syscall  runnable  waiting  goroutines  name")
	for _, r := range sorted {
		fmt.Fprintf(w, "%8.3f %8.3f %9.3f %8.3f %6d  %s\n", secs(r.in[trace.GoRunning]), secs(r.in[trace.GoSyscall]),
			secs(r.in[trace.GoRunnable]), secs(r.in[trace.GoWaiting]), r.n, r.name)
	}
}

// printTimeline prints every goroutine state change from from to from+span
// milliseconds after the trace's first event.
func printTimeline(w io.Writer, r *trace.Reader, from, span float64) error {
	return goTransitions(r, func(first trace.Time, ev trace.Event, st trace.StateTransition) {
		ms := float64(ev.Time()-first) / 1e6
		if ms < from || ms > from+span {
			return
		}
		a, b := st.Goroutine()
		fmt.Fprintf(w, "%9.1f µs  g%-6d %-9s -> %-9s %-16s self=%s  by=%s\n", (ms-from)*1000, st.Resource.Goroutine(), a, b, st.Reason, frames(st.Stack), frames(ev.Stack()))
	})
}

// frames names the first two frames of stack outside the runtime and the
// standard library's internals, innermost first.
func frames(stack trace.Stack) string {
	var out []string
	for fr := range stack.Frames() {
		f := fr.Func
		if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "sync.") || strings.HasPrefix(f, "internal/") || strings.HasPrefix(f, "syscall.") {
			continue
		}
		out = append(out, f[strings.LastIndex(f, "/")+1:])
		if len(out) == 2 {
			break
		}
	}
	return strings.Join(out, "<")
}

// printWakes prints how long goroutines waited for a processor after each
// kind of wake-up, and how long each kind of system call took.
func printWakes(w io.Writer, r *trace.Reader) error {
	type pending struct {
		at  trace.Time
		key string
	}
	readied := map[trace.GoID]pending{}
	inCall := map[trace.GoID]pending{}
	waits, calls := map[string][]trace.Time{}, map[string][]trace.Time{}
	err := goTransitions(r, func(_ trace.Time, ev trace.Event, st trace.StateTransition) {
		id, now := st.Resource.Goroutine(), ev.Time()
		a, b := st.Goroutine()
		switch {
		case a == trace.GoWaiting && b == trace.GoRunnable:
			readied[id] = pending{now, frames(ev.Stack())}
		case a == trace.GoRunnable && b == trace.GoRunning:
			if p, ok := readied[id]; ok && p.key != "" {
				waits[p.key] = append(waits[p.key], now-p.at)
			}
			delete(readied, id)
		case b == trace.GoSyscall:
			inCall[id] = pending{now, frames(st.Stack)}
		case a == trace.GoSyscall:
			if p, ok := inCall[id]; ok && p.key != "" {
				calls[p.key] = append(calls[p.key], now-p.at)
			}
			delete(inCall, id)
		}
	})
	if err != nil {
		return err
	}
	table := func(title string, m map[string][]trace.Time) {
		fmt.Fprintf(w, "%s\n%8s %9s %9s %9s  %s\n", title, "count", "p50 µs", "p90 µs", "mean µs", "where")
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if a, b := len(m[keys[i]]), len(m[keys[j]]); a != b {
				return a > b
			}
			return keys[i] < keys[j] // ties in a fixed order: the same 25 rows every run
		})
		for _, k := range keys[:min(len(keys), 25)] {
			d := m[k]
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			var sum trace.Time
			for _, x := range d {
				sum += x
			}
			us := func(t trace.Time) float64 { return float64(t) / 1e3 }
			fmt.Fprintf(w, "%8d %9.1f %9.1f %9.1f  %s\n", len(d), us(d[len(d)/2]), us(d[len(d)*9/10]), us(sum)/float64(len(d)), k)
		}
		fmt.Fprintln(w)
	}
	table("waits for a processor after a wake-up, by waker", waits)
	table("system calls, by call site", calls)
	return nil
}
