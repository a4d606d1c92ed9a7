package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"

	"github.com/portcullis-dev/portcullis/budget"
)

// toolsCallToday is tools/call at 64 clients on the code before issue 10
// (BENCHMARKS.md of 2026-11-29, commit dfbfe0f's parent measurements):
// the target asks for twice this.
const toolsCallToday = 785.0

func budgetLimit(acct string) budget.Limit {
	return budget.Limit{Account: acct, Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}
}

// Check is one target of issue 10 against what this run measured.
type Check struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Target   string  `json:"target"`
	Pass     bool    `json:"pass"`
	Measured bool    `json:"measured"`
	Detail   string  `json:"detail"`
	// Info marks a ratio reported for information: no target, no verdict.
	Info bool `json:"info,omitempty"`
}

func (c Check) verdict() string {
	switch {
	case !c.Measured:
		return "not measured"
	case c.Info:
		return "information"
	case c.Pass:
		return "met"
	default:
		return "MISSED"
	}
}

func (c Check) line() string {
	if !c.Measured {
		return fmt.Sprintf("%-58s %10s  target %-10s %s  %s", c.Name, "–", c.Target, c.verdict(), c.Detail)
	}
	return fmt.Sprintf("%-58s %10.2f  target %-10s %s  %s", c.Name, c.Value, c.Target, c.verdict(), c.Detail)
}

func find(cells []Cell, series string, callers int) (Cell, bool) {
	for _, c := range cells {
		if c.Series == series && c.Callers == callers {
			return c, true
		}
	}
	return Cell{}, false
}

// ceiling is the best raw rate at callers over the ways measured.
func ceiling(cells []Cell, callers int, series ...string) (Cell, bool) {
	var best Cell
	ok := false
	for _, s := range series {
		if c, found := find(cells, s, callers); found && c.Rate > best.Rate {
			best, ok = c, true
		}
	}
	return best, ok
}

func ratioCheck(cells []Cell, name, num, den string, callers int, atLeast float64) Check {
	c := Check{Name: name, Target: fmt.Sprintf("≥ %.2g", atLeast)}
	n, ok1 := find(cells, num, callers)
	d, ok2 := find(cells, den, callers)
	if ok1 && ok2 && d.Rate > 0 {
		c.Measured, c.Value = true, n.Rate/d.Rate
		c.Pass = c.Value >= atLeast
		c.Detail = fmt.Sprintf("%.0f vs %.0f /s", n.Rate, d.Rate)
	}
	return c
}

func checks(cells []Cell, shards int, hots []int) []Check {
	var out []Check
	out = append(out, ratioCheck(cells, "Begin / Postgres table, 64 callers", seriesBegin, seriesPG, 64, 1.5))
	for _, n := range []int{4, 16, 64, 256} {
		out = append(out, ratioCheck(cells, fmt.Sprintf("Begin / Postgres table, %d callers (never below)", n), seriesBegin, seriesPG, n, 1))
	}
	out = append(out, ratioCheck(cells, "attach / Postgres table attach, 64 callers", seriesAttach, seriesPGAttach, 64, 1))
	{
		c := Check{Name: fmt.Sprintf("Begin / sharded raw ceiling (%d streams), 64 callers", shards), Target: "≥ 0.7"}
		b, ok1 := find(cells, seriesBegin, 64)
		r, ok2 := ceiling(cells, 64, seriesRawN(shards), seriesRawNPlain(shards), seriesRaw1, seriesRaw1Plain)
		if ok1 && ok2 {
			c.Measured, c.Value = true, b.Rate/r.Rate
			c.Pass = c.Value >= 0.7
			c.Detail = fmt.Sprintf("%.0f vs %.0f /s (%s)", b.Rate, r.Rate, r.Series)
		}
		out = append(out, c)
		c = Check{Name: "Begin / one-stream raw ceiling, 64 callers", Target: "≥ 0.7"}
		r, ok2 = ceiling(cells, 64, seriesRaw1, seriesRaw1Plain)
		if ok1 && ok2 {
			c.Measured, c.Value = true, b.Rate/r.Rate
			c.Pass = c.Value >= 0.7
			c.Detail = fmt.Sprintf("%.0f vs %.0f /s (%s): the ledger writes one stream today", b.Rate, r.Rate, r.Series)
		}
		out = append(out, c)
	}
	{
		// Build item 4's target: the whole process's CPU (callers, gateway,
		// embedded NATS server, views) per Begin, where the issue measured
		// its 262–287 µs (64 callers).
		c := Check{Name: "CPU per Begin, 64 callers, µs", Target: "≤ 150"}
		if b, ok := find(cells, seriesBegin, 64); ok && b.CPUPerOp > 0 {
			c.Measured, c.Value = true, b.CPUPerOp
			c.Pass = c.Value <= 150
			c.Detail = fmt.Sprintf("the whole process's CPU per Begin at %.2f cores busy", b.Cores)
		}
		out = append(out, c)
	}
	{
		c := Check{Name: "tools/call, 64 clients / before issue 10 (785/s)", Target: "≥ 2"}
		if m, ok := find(cells, seriesMCP, 64); ok {
			c.Measured, c.Value = true, m.Rate/toolsCallToday
			c.Pass = c.Value >= 2
			c.Detail = fmt.Sprintf("%.0f calls/s", m.Rate)
			if d, ok := find(cells, seriesMCPDirect, 64); ok {
				c.Detail += fmt.Sprintf("; direct MCP server %.0f/s (ratio %.2f)", d.Rate, m.Rate/d.Rate)
			}
		}
		out = append(out, c)
	}
	{
		c := Check{Name: "tools/call p50 overhead at 1 client, ms", Target: "≤ 1.5"}
		m, ok1 := find(cells, seriesMCP, 1)
		d, ok2 := find(cells, seriesMCPDirect, 1)
		if ok1 && ok2 {
			c.Measured, c.Value = true, m.P50-d.P50
			c.Pass = c.Value <= 1.5
			c.Detail = fmt.Sprintf("p50 %.2f ms through Portcullis, %.2f ms direct", m.P50, d.P50)
		}
		out = append(out, c)
	}
	for _, h := range hots {
		c := Check{Name: fmt.Sprintf("hot account (%d closed), two gateways, reserve+settle/s", h), Target: "≥ 3000"}
		p := Check{Name: fmt.Sprintf("hot account (%d closed), p99 ms", h), Target: "≤ 50"}
		if m, ok := find(cells, seriesHot(h), 64); ok {
			c.Measured, c.Value, c.Pass = true, m.Rate, m.Rate >= 3000
			p.Measured, p.Value, p.Pass = true, m.P99, m.P99 <= 50
		}
		out = append(out, c, p)
	}
	{
		c := Check{Name: "hot account rate, 1k / 50k closed operations", Target: "≤ 1.5"}
		a, ok1 := find(cells, seriesHot(1000), 64)
		b, ok2 := find(cells, seriesHot(50000), 64)
		if ok1 && ok2 && b.Rate > 0 {
			c.Measured, c.Value = true, a.Rate/b.Rate
			c.Pass = c.Value <= 1.5
		}
		out = append(out, c)
	}
	return out
}

// markdown is report.md: every cell, every check, the plots.
func markdown(rep *Report, shards int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Side-by-side benchmark report\n\n")
	fmt.Fprintf(&b, "- Date: %s\n- Commit: %s\n- Machine: %s\n- Load average at start / end: %s / %s\n- Command: `%s`\n",
		rep.Date, rep.Commit, rep.Machine, rep.LoadFrom, rep.LoadTo, rep.Command)
	if rep.Rounds > 1 {
		fmt.Fprintf(&b, "- Rounds: %d. Each round measured every side-by-side series at every caller count, one count after another with its series back to back; a cell below is the median of its rounds (its note gives the rates' range; results.json every round). The hot account and the decision latency are measured in rounds too: each hot round measures every point back to back (a fresh account with the point's history per round); the decision latency's rounds run on each ledger size after its load, one size after the other.\n", rep.Rounds)
	}
	b.WriteString("\n")
	b.WriteString("## Targets (issue 10)\n\n| target | measured | wanted | verdict | detail |\n|---|---:|---|---|---|\n")
	for _, c := range rep.Checks {
		v := "–"
		if c.Measured {
			v = fmt.Sprintf("%.2f", c.Value)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Name, v, c.Target, c.verdict(), c.Detail)
	}
	b.WriteString("\n")
	b.WriteString(scaleMarkdown(rep))
	b.WriteString("## Plots\n\n")
	for _, name := range plotNames() {
		fmt.Fprintf(&b, "![%s](%s)\n\n", name, name)
	}
	b.WriteString("## Every cell\n\nCPU is this process's (callers, gateway, embedded NATS server, views; Postgres and Redis run apart), per operation and in cores busy over the window.\n\n")
	b.WriteString("| series | callers | rate | unit | p50 ms | p99 ms | ops | CPU µs/op | cores | note |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, c := range rep.Cells {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %.2f | %.2f | %d | %.0f | %.2f | %s |\n", c.Series, c.Callers, c.Rate, c.Unit, c.P50, c.P99, c.Ops, c.CPUPerOp, c.Cores, c.Note)
	}
	return b.String()
}

func plotNames() []string {
	return []string{"begin.svg", "attach.svg", "reserve.svg", "toolscall.svg", "latency.svg", "scale.svg"}
}

// plots draws each chart of the report as SVG.
func plots(cells []Cell, shards int) map[string]string {
	raw := []string{seriesRaw1, seriesRaw1Plain, seriesRawN(shards), seriesRawNPlain(shards)}
	rate := func(c Cell) float64 { return c.Rate }
	p50 := func(c Cell) float64 { return c.P50 }
	return map[string]string{
		"begin.svg": chart("Begin (new intent) vs baselines: decisions/s", "decisions/s (log)", cells, rate,
			append([]string{seriesBegin, seriesBeginConnect, seriesPG, seriesRedis}, raw...)),
		"attach.svg": chart("Attach (retry of a known intent) vs baselines: decisions/s", "decisions/s (log)", cells, rate,
			append([]string{seriesAttach, seriesAttachConnect, seriesPGAttach, seriesPG}, raw...)),
		"reserve.svg": chart("Reserve + settle over 1 000 accounts", "operations/s (log)", cells, rate,
			[]string{seriesReserve, seriesReserveConnect}),
		"toolscall.svg": chart("MCP tools/call: through Portcullis vs a direct MCP server", "calls/s (log)", cells, rate,
			[]string{seriesMCP, seriesMCPSession, seriesMCPDirect}),
		"latency.svg": chart("p50 latency", "ms (log)", cells, p50,
			[]string{seriesBegin, seriesBeginConnect, seriesPG, seriesRedis, seriesMCP, seriesMCPDirect}),
	}
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// pt is one point of a chart line.
type pt struct {
	x int
	y float64
}

// chart is a line chart of value(cell) against callers (log x, log y).
func chart(title, ylabel string, cells []Cell, value func(Cell) float64, series []string) string {
	lines := map[string][]pt{}
	var present []string
	for _, s := range series {
		for _, c := range cells {
			if c.Series == s && value(c) > 0 {
				lines[s] = append(lines[s], pt{c.Callers, value(c)})
			}
		}
		if len(lines[s]) > 0 {
			present = append(present, s)
		}
	}
	return draw(title, ylabel, "concurrent callers", present, lines, func(s string) bool {
		return strings.HasPrefix(s, "raw") || strings.HasPrefix(s, "redis")
	})
}

// draw is a line chart of lines (in the order of present; x at evenly
// spaced positions, log y); dashed(s) draws line s dashed.
func draw(title, ylabel, xlabel string, present []string, lines map[string][]pt, dashed func(string) bool) string {
	var xs []int
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range present {
		for _, p := range lines[s] {
			if !slices.Contains(xs, p.x) {
				xs = append(xs, p.x)
			}
			lo, hi = min(lo, p.y), max(hi, p.y)
		}
	}
	slices.Sort(xs)
	const w, h, ml, mr, mt, mb = 720.0, 400.0, 70.0, 20.0, 40.0, 50.0
	legendRows := (len(present) + 2) / 3
	total := h + float64(legendRows)*18 + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, total, w, total)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", ml, html.EscapeString(title))
	if len(xs) == 0 {
		b.WriteString(`<text x="70" y="80">no data</text></svg>`)
		return b.String()
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi <= ylo {
		yhi = ylo + 1
	}
	pw, ph := w-ml-mr, h-mt-mb
	xpos := func(x int) float64 {
		if len(xs) == 1 {
			return ml + pw/2
		}
		return ml + pw*float64(slices.Index(xs, x))/float64(len(xs)-1)
	}
	ypos := func(v float64) float64 { return mt + ph*(1-(math.Log10(v)-ylo)/(yhi-ylo)) }
	// grid
	for d := ylo; d <= yhi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > yhi+1e-9 {
				break
			}
			y := ypos(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", ml, y, ml+pw, y, stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", ml-6, y+4, human(v))
		}
	}
	for _, x := range xs {
		px := xpos(x)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", px, mt, px, mt+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", px, mt+ph+16, human(float64(x)))
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", ml, mt, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", ml+pw/2, mt+ph+34, html.EscapeString(xlabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" text-anchor="middle" fill="#444" transform="rotate(-90 14 %.1f)">%s</text>`+"\n", mt+ph/2, mt+ph/2, html.EscapeString(ylabel))
	for i, s := range present {
		col := palette[i%len(palette)]
		pts := lines[s]
		slices.SortFunc(pts, func(a, b pt) int { return a.x - b.x })
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", xpos(p.x), ypos(p.y)))
		}
		dash := ""
		if dashed(s) {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(path, " "))
		for _, p := range pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %s %s: %s</title></circle>`+"\n",
				xpos(p.x), ypos(p.y), col, html.EscapeString(s), human(float64(p.x)), html.EscapeString(xlabel), human(p.y))
		}
		lx, ly := ml+float64(i%3)*(pw/3), h+float64(i/3)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+22, ly-4, col, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+28, ly, html.EscapeString(s))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return trim(v/1e6) + "M"
	case v >= 1e3:
		return trim(v/1e3) + "k"
	default:
		return trim(v)
	}
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
