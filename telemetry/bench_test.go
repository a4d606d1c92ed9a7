package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

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

// BenchmarkMCPMiddleware is what the /mcp middleware adds to one tools/call
// (its peek at the body, the duration histogram; a span only when tracing
// is configured: here the no-op provider, as without an exporter).
func BenchmarkMCPMiddleware(b *testing.B) {
	m := NewMetrics()
	h := m.MCP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), noop.NewTracerProvider(), func(string) bool { return true })
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench-agent","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"name":"deploy_release","arguments":{"release_id":"r-6"}}}`
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		h.ServeHTTP(w, r)
	}
}
