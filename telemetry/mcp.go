package telemetry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// mcpPeekBytes is how much of a request body the middleware reads to learn
// the JSON-RPC method and tool name; the whole body still reaches the
// handler, which enforces its own limit.
const mcpPeekBytes = 1 << 20

// Attribute names of the OpenTelemetry MCP semantic conventions.
const (
	attrMethod  = "mcp.method.name"
	attrTool    = "gen_ai.tool.name"
	attrSession = "mcp.session.id"
	attrReqID   = "jsonrpc.request.id"
	attrError   = "error.type"
)

// rpcPeek is the part of a JSON-RPC request the middleware looks at.
type rpcPeek struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
		// Meta is decoded only when spans are recorded (it carries the
		// W3C trace context).
		Meta json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// traceCarrier reads the W3C trace context from params._meta (string
// values only, as the MCP semantic conventions send it).
func traceCarrier(meta json.RawMessage, fields []string) propagation.MapCarrier {
	carrier := propagation.MapCarrier{}
	var m map[string]any
	if len(meta) == 0 || json.Unmarshal(meta, &m) != nil {
		return carrier
	}
	for _, k := range fields {
		if s, ok := m[k].(string); ok {
			carrier[k] = s
		}
	}
	return carrier
}

// OtherValue stands for a method or tool name that is not one of a known
// set, in metric labels and span names (the OpenTelemetry conventions'
// "_OTHER"): an agent that may call any name must not mint a series per
// name, nor put its text (a secret pasted by mistake, 5 000 characters)
// into /metrics.
const OtherValue = "_OTHER"

// mcpMethods are the MCP methods a label may name.
var mcpMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
}

// MCP wraps the /mcp handler: for every JSON-RPC request POSTed it observes
// mcp_server_operation_duration_seconds{mcp_method_name, gen_ai_tool_name,
// error_type} and opens a server span named after the method (and tool)
// that continues the trace an MCP client sends as
// params._meta.traceparent / tracestate (W3C Trace Context). A method
// outside MCP's and a tool that tools does not know are OtherValue there.
// Responses and GETs (event streams) pass through untouched. tp nil or
// the no-op provider (no exporter configured): no spans, and _meta is not
// decoded.
func (m *Metrics) MCP(next http.Handler, tp trace.TracerProvider, tools func(name string) bool) http.Handler {
	var tracer trace.Tracer
	if _, off := tp.(noop.TracerProvider); tp != nil && !off {
		tracer = tp.Tracer("github.com/portcullis-dev/portcullis/telemetry")
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, mcpPeekBytes))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		var req rpcPeek
		if json.Unmarshal(head, &req) != nil || req.Method == "" || len(req.ID) == 0 {
			next.ServeHTTP(w, r) // a notification, a response, a batch or not JSON
			return
		}
		method, tool := req.Method, ""
		if !mcpMethods[method] {
			method = OtherValue
		}
		if method == "tools/call" {
			tool = req.Params.Name
			if !tools(tool) {
				tool = OtherValue
			}
		}
		ctx := r.Context()
		var span trace.Span
		if tracer != nil {
			ctx = prop.Extract(ctx, traceCarrier(req.Params.Meta, prop.Fields()))
			name := method
			if tool != "" {
				name += " " + tool
			}
			attrs := []attribute.KeyValue{attribute.String(attrMethod, method), attribute.String(attrReqID, string(req.ID))}
			if tool != "" {
				attrs = append(attrs, attribute.String(attrTool, tool))
			}
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
				attrs = append(attrs, attribute.String(attrSession, sid))
			}
			ctx, span = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			r = r.WithContext(ctx)
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(sw, r)
		errType := ""
		switch {
		case sw.status >= 400:
			errType = strconv.Itoa(sw.status)
		case r.Context().Err() != nil:
			errType = "canceled" // the client went away before the answer was written
		}
		m.mcpDuration.WithLabelValues(method, tool, errType).Observe(time.Since(start).Seconds())
		if span != nil {
			if errType != "" {
				span.SetAttributes(attribute.String(attrError, errType))
				span.SetStatus(codes.Error, errType)
			}
			span.End()
		}
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// statusWriter remembers the status; it keeps Flush and Unwrap reachable
// (event streams need them).
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
