package telemetry

import (
	"context"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// nopLog accepts every append at once, so the benchmark measures only
// what the metrics add to one.
type nopLog struct{ ledger.Log }

func (nopLog) Append(_ context.Context, msgs ...ledger.Message) ([]uint64, error) {
	return make([]uint64, len(msgs)), nil
}

// BenchmarkMetricsPerAppend is the cost the metrics add to one decision
// (timing, a histogram, a counter per event) and to one commit group.
func BenchmarkMetricsPerAppend(b *testing.B) {
	m := NewMetrics()
	l := m.Log(ledger.ExecutionsStream, nopLog{})
	commit := m.OnCommit(ledger.ExecutionsStream)
	msg := ledger.Message{Event: &pb.Event{Type: pb.EventType_EVENT_TYPE_DISPATCHED,
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{}}}}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(ctx, msg); err != nil {
				b.Fatal(err)
			}
			commit(1, time.Millisecond)
		}
	})
}
