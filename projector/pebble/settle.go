package pebble

import (
	"context"
	"time"
)

// Compaction is the views' compaction state: Pebble's estimate of the
// bytes it must still compact (it counts every byte in L0 while the base
// level holds data, so it stays above zero while a few L0 files sit below
// the compaction threshold), the compactions running now, and the highest
// compaction score of any level (Pebble picks a compaction only for a
// score of 1 or more).
type Compaction struct {
	DebtBytes  uint64
	InProgress int64
	MaxScore   float64
}

// Idle reports whether Pebble has no compaction running and none to pick.
func (c Compaction) Idle() bool { return c.InProgress == 0 && c.MaxScore < 1 }

// Compaction reads the views' compaction state.
func (v *Views) Compaction() Compaction {
	m := v.db.Metrics()
	c := Compaction{DebtBytes: m.Compact.EstimatedDebt, InProgress: m.Compact.NumInProgress}
	for _, l := range m.Levels {
		c.MaxScore = max(c.MaxScore, l.Score)
	}
	return c
}

// Settle waits until the views' compactions are done: no compaction debt,
// or no compaction running and none to pick, seen twice 250 ms apart (a
// compaction may be about to start); or until ctx ends. It returns the
// state it found first and the state it ended on. Benchmarks call it so a
// measurement after a bulk load is of a steady store, not of the load's
// compactions.
func (v *Views) Settle(ctx context.Context) (first, last Compaction, err error) {
	first = v.Compaction()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	idle := 0
	for last = first; last.DebtBytes > 0 && idle < 2; {
		select {
		case <-ctx.Done():
			return first, last, ctx.Err()
		case <-t.C:
		}
		if last = v.Compaction(); last.Idle() {
			idle++
		} else {
			idle = 0
		}
	}
	return first, last, nil
}
