package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The hot-account series: one budget account under 64 callers on two
// gateways of one ledger, after a history of closed operations (issue 10:
// 1 000 and 50 000). Its points are measured in rounds like the
// side-by-side cells: every point's accounts are built first, one account
// per round, then each round times a fresh account of every point back to
// back, so the points a target compares are seconds apart and each round
// times an account with the history its point names. (The points' ledgers
// are small, unlike the scale series', whose sizes run one at a time.)

// hotLedger is one point: two gateways on a ledger of their own, and one
// account per round with closed operations before it.
type hotLedger struct {
	closed int
	gs     []*gw
	build  float64 // closed operations per second while building
}

// hotAccountName is the account round r (from 0) measures.
func hotAccountName(r int) string { return fmt.Sprintf("hot-%d", r) }

// startHot starts a point's gateways and builds its rounds' accounts, then
// waits for both gateways' views to settle (the history load's view
// writes and compactions are not what a cell should time).
func startHot(ctx context.Context, closed, rounds int) (_ *hotLedger, err error) {
	h := &hotLedger{closed: closed}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	g1, err := startGW(ctx, ledgerConfig, nil, "")
	if err != nil {
		return nil, err
	}
	h.gs = append(h.gs, g1)
	g2, err := startGW(ctx, ledgerConfig, g1, "gw-bench-2")
	if err != nil {
		return nil, err
	}
	h.gs = append(h.gs, g2)
	t0 := time.Now()
	for r := range rounds {
		acct := hotAccountName(r)
		if _, err := g1.Keeper.SetLimit(ctx, budgetLimit(acct)); err != nil {
			return nil, err
		}
		if _, err := measureCount(ctx, 64, closed, accountOp(h.gs, func(int) string { return acct }, "pre")); err != nil {
			return nil, fmt.Errorf("build %s: %w", acct, err)
		}
	}
	h.build = float64(closed*rounds) / time.Since(t0).Seconds()
	if err := settleBudgetViews(ctx, h.gs); err != nil {
		return nil, err
	}
	return h, nil
}

// close stops the gateways, the one holding the embedded server last.
func (h *hotLedger) close() {
	for i := len(h.gs) - 1; i >= 0; i-- {
		h.gs[i].close()
	}
}

// hotWarm is how many reserve+settle operations go untimed before a
// round's: the account was built seconds to a minute before, its leader's
// lease (LeaseTTL, 3 s) has lapsed, and the first commands take it again.
const hotWarm = 128

// measure times ops reserve+settle on round r's account, after hotWarm.
func (h *hotLedger) measure(ctx context.Context, r, rounds, ops int) (Cell, error) {
	acct := hotAccountName(r)
	on := func(int) string { return acct }
	if _, err := measureCount(ctx, 64, hotWarm, accountOp(h.gs, on, "warm")); err != nil {
		return Cell{}, err
	}
	compacting := watchCompactions(h.gs)
	cell, err := measureCountAs(ctx, roundLabel(seriesHot(h.closed), r, rounds), 64, ops, accountOp(h.gs, on, "hot"))
	views := compacting()
	if err != nil {
		return Cell{}, err
	}
	cell.Series, cell.Unit = seriesHot(h.closed), "reserve+settle/s"
	cell.Note = fmt.Sprintf("two gateways, 64 callers; an account with %d closed operations before (built at %.0f/s) and %d untimed, %d after",
		h.closed, h.build, hotWarm, h.closed+hotWarm+ops)
	cell.ViewsCompacting = views
	return cell, nil
}

// compactionSample is how often watchCompactions looks.
const compactionSample = 20 * time.Millisecond

// watchCompactions samples, until the returned function is called, whether
// each gateway's views have a Pebble compaction running, and then says in
// how many samples they had (Cell.ViewsCompacting): a round that both gateways' views compact in
// runs slower than the others on two cores (BENCHMARKS.md).
func watchCompactions(gs []*gw) func() string {
	busy := make([]int, len(gs))
	samples := 0
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(compactionSample)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			samples++
			for i, g := range gs {
				if g.Views.Compaction().InProgress > 0 {
					busy[i]++
				}
			}
		}
	}()
	return func() string {
		close(done)
		<-stopped
		var each []string
		for _, b := range busy {
			each = append(each, fmt.Sprintf("%d/%d", b, samples))
		}
		return fmt.Sprintf("%s (every %v, each gateway)", strings.Join(each, ", "), compactionSample)
	}
}

// hotSeries measures every point in rounds and returns each point's
// median cell (with its rounds).
func hotSeries(ctx context.Context, points []int, ops, rounds int) ([]Cell, error) {
	var hs []*hotLedger
	defer func() {
		for _, h := range hs {
			h.close()
		}
	}()
	for _, n := range points {
		h, err := startHot(ctx, n, rounds)
		if err != nil {
			return nil, fmt.Errorf("hot account %d: %w", n, err)
		}
		hs = append(hs, h)
	}
	measured := make([][]Cell, len(hs))
	for r := range rounds {
		for i, h := range hs {
			cell, err := h.measure(ctx, r, rounds, ops)
			if err != nil {
				return nil, fmt.Errorf("hot account %d, round %d: %w", h.closed, r+1, err)
			}
			printRound(cell, r, rounds)
			measured[i] = append(measured[i], cell)
		}
	}
	out := make([]Cell, len(hs))
	for i := range hs {
		out[i] = roundsMedian(measured[i])
	}
	return out, nil
}
