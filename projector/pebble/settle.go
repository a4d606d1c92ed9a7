package pebble

import (
	"context"
	"time"
)

// Compaction is the views' compaction state: the bytes Pebble estimates it
// must still compact to bring every level within its target size, and the
// compactions running now.
type Compaction struct {
	DebtBytes  uint64
	InProgress int64
}

// Compaction reads the views' compaction state.
func (v *Views) Compaction() Compaction {
	m := v.db.Metrics()
	return Compaction{DebtBytes: m.Compact.EstimatedDebt, InProgress: m.Compact.NumInProgress}
}

// Settle waits until the views have no compaction debt and no compaction
// in progress (polled every 100 ms), or ctx ends. It returns the state it
// found first; benchmarks call it so a measurement after a bulk load is of
// a steady store, not of the load's compactions.
func (v *Views) Settle(ctx context.Context) (Compaction, error) {
	first := v.Compaction()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for c := first; c.DebtBytes > 0 || c.InProgress > 0; c = v.Compaction() {
		select {
		case <-ctx.Done():
			return first, ctx.Err()
		case <-t.C:
		}
	}
	return first, nil
}
