package telemetry

import (
	"context"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Log decorates a ledger.Log: it times every append and counts the
// transitions and budget decisions that landed.
func (m *Metrics) Log(stream string, l ledger.Log) ledger.Log {
	return &countingLog{Log: l, m: m, seconds: m.appendSeconds.WithLabelValues(stream)}
}

type countingLog struct {
	ledger.Log
	m       *Metrics
	seconds interface{ Observe(float64) }
}

func (c *countingLog) Append(ctx context.Context, msgs ...ledger.Message) ([]uint64, error) {
	start := time.Now()
	seqs, err := c.Log.Append(ctx, msgs...)
	c.seconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return seqs, err
	}
	for _, msg := range msgs {
		ev := msg.Event
		switch {
		case ev.GetExecutionChanged() != nil:
			c.m.Decided(KindTransition, EventName(ev.GetType()))
		case ev.GetBudgetChanged() != nil:
			c.m.Decided(KindBudget, budgetOutcome(ev))
		}
	}
	return seqs, nil
}

func budgetOutcome(ev *pb.Event) string {
	switch ev.GetType() {
	case pb.EventType_EVENT_TYPE_BUDGET_RESERVED:
		return OutcomeAllowed
	case pb.EventType_EVENT_TYPE_BUDGET_DENIED:
		return OutcomeDenied
	default:
		return strings.TrimPrefix(EventName(ev.GetType()), "budget_")
	}
}
