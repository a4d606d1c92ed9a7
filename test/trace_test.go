package test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/server"
)

// otlpReceiver is a real OTLP/HTTP endpoint on 127.0.0.1 that keeps the
// spans it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// An MCP client's tools/call carries a W3C traceparent in _meta: the
// gateway's span for it continues that trace (same trace id, the client's
// span as parent) and is exported over OTLP; Connect calls get spans from
// otelconnect.
func TestMCPToolsCallContinuesTraceparent(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tg := newTarget(t)
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: mcpConfig(t, tg), NatsListen: "127.0.0.1:-1",
		FingerprintKey: testKey, OTLPEndpoint: rcv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			g.Close(context.Background())
		}
	})
	sess, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{
		Name: "deploy_release", Arguments: map[string]any{"release_id": "2026.12.02"},
		Meta: sdk.Meta{"traceparent": "00-" + traceID + "-" + parentID + "-01"},
	})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %v", res, err)
	}
	_ = sess.Close()
	if _, err := client(g).ListExecutions(context.Background(), connect.NewRequest(&pb.ListExecutionsRequest{})); err != nil {
		t.Fatal(err)
	}
	g.Close(context.Background()) // flushes the exporter
	closed = true

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var found bool
	for _, s := range rcv.spans {
		if s.GetName() != "tools/call deploy_release" {
			continue
		}
		found = true
		if got := hex.EncodeToString(s.GetTraceId()); got != traceID {
			t.Errorf("tools/call span trace id %s, want the client's %s", got, traceID)
		}
		if got := hex.EncodeToString(s.GetParentSpanId()); got != parentID {
			t.Errorf("tools/call span parent %s, want the client's span %s", got, parentID)
		}
		attrs := map[string]string{}
		for _, kv := range s.GetAttributes() {
			attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "deploy_release" {
			t.Errorf("tools/call span attributes %v", attrs)
		}
	}
	var connectSpan bool
	for _, s := range rcv.spans {
		connectSpan = connectSpan || s.GetName() == "portcullis.v1.ExecutionService/ListExecutions"
	}
	if !connectSpan {
		t.Error("no otelconnect span for ListExecutions")
	}
	if !found {
		var names []string
		for _, s := range rcv.spans {
			names = append(names, s.GetName())
		}
		t.Fatalf("no tools/call span among %v", names)
	}
}
