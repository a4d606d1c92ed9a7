package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A projector behind its stream is stuck only when it has applied nothing
// for StuckAfter; catching up, or any progress, clears it.
func TestReadinessStuckProjector(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var last, applied uint64
	r := &Readiness{
		Streams:    map[string]StreamLag{"S": func(context.Context) (uint64, uint64, error) { return last, applied, nil }},
		StuckAfter: 30 * time.Second,
		Now:        func() time.Time { return now },
	}
	step := []struct {
		advance       time.Duration
		last, applied uint64
		stuck         bool
	}{
		{0, 10, 10, false},                // caught up
		{time.Minute, 20, 10, false},      // behind, first seen
		{29 * time.Second, 25, 10, false}, // lag grew, not yet StuckAfter
		{time.Second, 25, 10, true},       // 30 s without shrinking
		{time.Second, 25, 12, false},      // progress: the clock restarts
		{29 * time.Second, 25, 12, false},
		{time.Second, 25, 12, true},
		{0, 25, 25, false}, // caught up again
		{time.Hour, 30, 25, false},
	}
	for i, s := range step {
		now = now.Add(s.advance)
		last, applied = s.last, s.applied
		err := r.Problem(context.Background())
		if (err != nil) != s.stuck {
			t.Fatalf("step %d (lag %d): problem %v, want stuck=%v", i, s.last-s.applied, err, s.stuck)
		}
		if err != nil && !strings.Contains(err.Error(), "stuck") {
			t.Fatalf("step %d: %v does not say stuck", i, err)
		}
	}
	r.Connected = func() error { return errors.New("connection RECONNECTING") }
	if err := r.Problem(context.Background()); err == nil || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("NATS down: %v", err)
	}
}
