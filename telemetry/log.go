package telemetry

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Log decorates a ledger.Log: it times every append and counts the
// transitions and budget decisions that landed.
func (m *Metrics) Log(stream string, l ledger.Log) ledger.Log {
	c := &countingLog{Log: l, seconds: m.appendSeconds.WithLabelValues(stream),
		transitions: map[pb.EventType]prometheus.Counter{}, budget: map[pb.EventType]prometheus.Counter{}}
	for v, name := range pb.EventType_name {
		t := pb.EventType(v)
		switch {
		case t == pb.EventType_EVENT_TYPE_BUDGET_GROUP: // counted by its decisions
		case strings.HasPrefix(name, "EVENT_TYPE_BUDGET_"):
			c.budget[t] = m.decisions.WithLabelValues(KindBudget, budgetOutcome(t))
		case t == pb.EventType_EVENT_TYPE_UNSPECIFIED, t == pb.EventType_EVENT_TYPE_CHECKPOINT, strings.HasPrefix(name, "EVENT_TYPE_SESSION_"):
		case t == pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED:
			// Accepted and dispatched in one event: a dispatch (the
			// acceptance is counted as the Begin's decision).
			c.transitions[t] = m.decisions.WithLabelValues(KindTransition, EventName(pb.EventType_EVENT_TYPE_DISPATCHED))
		default:
			c.transitions[t] = m.decisions.WithLabelValues(KindTransition, EventName(t))
		}
	}
	return c
}

// countingLog resolves its counters once, so an append pays a map lookup
// per event, not a label lookup.
type countingLog struct {
	ledger.Log
	seconds     prometheus.Observer
	transitions map[pb.EventType]prometheus.Counter // read-only after Log
	budget      map[pb.EventType]prometheus.Counter
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
		var counters map[pb.EventType]prometheus.Counter
		switch {
		case ev.GetExecutionChanged() != nil:
			counters = c.transitions
		case ev.GetType() == pb.EventType_EVENT_TYPE_BUDGET_GROUP:
			for _, d := range ev.GetBudgetChanged().GetGroup() { // a commit group: each decision
				t := pb.EventType(pb.EventType_value["EVENT_TYPE_BUDGET_"+strings.ToUpper(d.GetOutcome())])
				if n, ok := c.budget[t]; ok {
					n.Inc()
				}
			}
			continue
		case ev.GetBudgetChanged() != nil:
			counters = c.budget
		default:
			continue
		}
		if n, ok := counters[ev.GetType()]; ok {
			n.Inc()
		}
	}
	return seqs, nil
}

func budgetOutcome(t pb.EventType) string {
	switch t {
	case pb.EventType_EVENT_TYPE_BUDGET_RESERVED:
		return OutcomeAllowed
	case pb.EventType_EVENT_TYPE_BUDGET_DENIED:
		return OutcomeDenied
	default:
		return strings.TrimPrefix(EventName(t), "budget_")
	}
}
