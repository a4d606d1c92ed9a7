package test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	natsserver "github.com/nats-io/nats-server/v2/server"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/telemetry"
)

// plainBegin is a Begin that names only what a caller must: the tool's
// definition supplies channel, target and method.
func plainBegin(t *testing.T, tool string, a map[string]any, jsonrpcID string) *connect.Request[pb.BeginRequest] {
	return connect.NewRequest(&pb.BeginRequest{
		Action:      &pb.Action{Actor: "agent-7", Tool: tool, Arguments: args(t, a), IntentScope: "run:5f8097"},
		Correlation: &pb.Correlation{JsonrpcId: jsonrpcID, SessionId: "sess-1"},
	})
}

// scrape reads the gateway's /metrics.
func scrape(t *testing.T, g *server.Gateway) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + g.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample finds the sample of family name whose labels include want; for a
// histogram it returns the sample count.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	for _, m := range metrics(fams, name, want) {
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// metrics are the samples of family name whose labels include want.
func metrics(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
next:
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func wantSample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := sample(t, fams, name, labels)
	if !ok {
		t.Errorf("%s%v: missing", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func wantAtLeast(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, least float64) {
	t.Helper()
	got, ok := sample(t, fams, name, labels)
	if !ok || got < least {
		t.Errorf("%s%v = %v (present %v), want at least %v", name, labels, got, ok, least)
	}
}

// A scripted incident: an agent's tools/call over MCP, a payment whose
// outcome is lost (OUTCOME_UNKNOWN through Connect) and its retry, a
// refused Begin, a budget allowed and one denied, a quarantined event. The
// scrape afterwards shows each of them.
func TestMetricsAfterIncident(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")

	// The agent deploys over MCP.
	sess, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "2026.12.01"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %v", res, err)
	}
	// Names an agent makes up (a tool that does not exist, a method MCP
	// does not have) count under _OTHER: they mint no series of their own
	// and their text never reaches /metrics.
	if _, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "sk_live_madeup_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("tools/call of an unknown tool succeeded")
	}
	_ = sess.Close()
	h, body := modernRequest(9, "sk_live_madeup/method", "", nil, nil, false)
	rawPost(t, g, agentToken, h, body)

	// An executor's payment: dispatched, then its answer is lost.
	c := client(g)
	b, err := c.Begin(ctx, plainBegin(t, "create_payment", map[string]any{"amount": 12}, "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := b.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: "timeout after body sent"})))
	retry, err := c.Begin(ctx, plainBegin(t, "create_payment", map[string]any{"amount": 12}, "2"))
	if err != nil || retry.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED {
		t.Fatalf("retry: %v %v", retry, err)
	}
	_, err = c.Begin(ctx, plainBegin(t, "no_such_tool", map[string]any{}, "3"))
	wantCode(t, err, connect.CodeFailedPrecondition)

	bc := budgetClient(g)
	// The limit is set in-process: who may delegate is the auth layer's
	// business, not this test's.
	if _, err := g.Keeper.SetLimit(ctx, budget.Limit{Account: "ops", Limit: 10_000, Currency: "EUR", Delegator: "cfo"}); err != nil {
		t.Fatal(err)
	}
	mustOK(t)(bc.Reserve(ctx, reserve("ops", "op-1", "sha256:a", 8_000)))
	denied, err := bc.Reserve(ctx, reserve("ops", "op-2", "sha256:b", 5_000))
	if err != nil || denied.Msg.GetDecision().GetAllowed() {
		t.Fatalf("over-limit reserve: %v %v", denied, err)
	}

	g.Metrics.Quarantined(ledger.ExecutionsStream, "signature")

	// Let the projectors fold everything, then scrape. A DELIVERED may
	// still land meanwhile (the second call was evidence for the first
	// one's result, when it came on the same connection, and DELIVERED
	// lingers up to 50 ms before it is appended): a scrape counts only
	// when the stream did not move while it was taken.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last uint64
	var m map[string]*dto.MetricFamily
	for attempt := 1; ; attempt++ {
		if last, err = g.ExecutionsLog.LastSeq(wctx); err != nil {
			t.Fatal(err)
		}
		if err := g.Views.WaitFor(wctx, last); err != nil {
			t.Fatal(err)
		}
		bs := budgetStream(t, g)
		info, err := bs.Info(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Views.BudgetWaitFor(wctx, info.State.LastSeq); err != nil {
			t.Fatal(err)
		}
		m = scrape(t, g)
		after, err := g.ExecutionsLog.LastSeq(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if after == last {
			break
		}
		if attempt == 5 {
			t.Fatalf("the executions stream kept moving while it was scraped (%d → %d)", last, after)
		}
	}

	dec := "portcullis_decisions_total"
	wantSample(t, m, dec, map[string]string{"kind": "begin", "outcome": "new"}, 2)
	wantSample(t, m, dec, map[string]string{"kind": "begin", "outcome": "attached"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "begin", "outcome": "refused"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "transition", "outcome": "dispatched"}, 2)
	wantSample(t, m, dec, map[string]string{"kind": "transition", "outcome": "outcome_unknown"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "transition", "outcome": "attached"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "budget", "outcome": "allowed"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "budget", "outcome": "denied"}, 1)
	wantSample(t, m, dec, map[string]string{"kind": "budget", "outcome": "limit_set"}, 1)

	wantAtLeast(t, m, "portcullis_append_duration_seconds", map[string]string{"stream": ledger.ExecutionsStream}, 5)
	wantAtLeast(t, m, "portcullis_append_duration_seconds", map[string]string{"stream": "PORTCULLIS_BUDGET"}, 3)
	wantAtLeast(t, m, "portcullis_commit_group_duration_seconds", map[string]string{"stream": ledger.ExecutionsStream}, 1)
	wantAtLeast(t, m, "portcullis_commit_group_messages", map[string]string{"stream": ledger.ExecutionsStream}, 1)

	wantSample(t, m, "portcullis_projector_lag_events", map[string]string{"stream": ledger.ExecutionsStream}, 0)
	wantSample(t, m, "portcullis_projector_lag_events", map[string]string{"stream": "PORTCULLIS_BUDGET"}, 0)
	wantSample(t, m, "portcullis_stream_last_seq", map[string]string{"stream": ledger.ExecutionsStream}, float64(last))

	wantSample(t, m, "portcullis_executions", map[string]string{"state": "outcome_unknown"}, 1)
	wantSample(t, m, "portcullis_executions", map[string]string{"state": "dispatched"}, 0)
	wantSample(t, m, "portcullis_overdue_dispatches", nil, 0) // the deadline sweep feeds it; nothing here is overdue
	wantSample(t, m, "portcullis_quarantined_events_total", map[string]string{"stream": ledger.ExecutionsStream, "reason": "signature"}, 1)

	acct := map[string]string{"account": "ops", "currency": "EUR"}
	wantSample(t, m, "portcullis_budget_limit_minor", acct, 10_000)
	wantSample(t, m, "portcullis_budget_held_minor", acct, 8_000)
	wantSample(t, m, "portcullis_budget_spent_minor", acct, 0)

	mcpOp := "mcp_server_operation_duration_seconds"
	wantSample(t, m, mcpOp, map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "deploy_release", "error_type": ""}, 1)
	wantSample(t, m, mcpOp, map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": telemetry.OtherValue}, 1)
	wantAtLeast(t, m, mcpOp, map[string]string{"mcp_method_name": telemetry.OtherValue, "gen_ai_tool_name": ""}, 1)
	resp, err := http.Get("http://" + g.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(raw), "sk_live_madeup") {
		t.Fatal("/metrics carries a name an agent made up")
	}
}

// Readiness follows NATS: a gateway joined to a NATS server reports ready
// and SERVING; once that server is gone, /readyz answers 503 and
// grpc.health.v1 NOT_SERVING, while /healthz (liveness) stays 200.
func TestReadinessFailsWithoutNATS(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: ns.ClientURL(),
		FingerprintKey: testKey, GatewayID: "gw-ready", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })

	if code, body := get(t, g, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with NATS up: %d %s", code, body)
	}
	if s := healthStatus(t, g); s != "SERVING" {
		t.Fatalf("health with NATS up: %s", s)
	}

	ns.Shutdown()
	ns.WaitForShutdown()

	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get(t, g, "/readyz")
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, "nats") {
				t.Fatalf("/readyz does not say why: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after NATS stopped: %s", code, body)
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	if s := healthStatus(t, g); s != "NOT_SERVING" {
		t.Fatalf("health with NATS gone: %s", s)
	}
	if code, _ := get(t, g, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with NATS gone: %d", code)
	}
}

func get(t *testing.T, g *server.Gateway, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + g.Addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// healthStatus asks grpc.health.v1.Health/Check in Connect's JSON.
func healthStatus(t *testing.T, g *server.Gateway) string {
	t.Helper()
	resp, err := http.Post("http://"+g.Addr+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case strings.Contains(string(b), `NOT_SERVING"`):
		return "NOT_SERVING"
	case strings.Contains(string(b), `_SERVING"`):
		return "SERVING"
	}
	return resp.Status + " " + string(b)
}

// Read RPCs are free of side effects, so Connect GET works for them (and
// caches can keep their answers); writes still need POST.
func TestConnectGETOnReadRPCs(t *testing.T) {
	g := startGateway(t, "", nil)
	q := "?connect=v1&encoding=json&message=" + url.QueryEscape(`{"pageSize":5}`)
	for _, path := range []string{"/portcullis.v1.ExecutionService/ListExecutions", "/portcullis.v1.ApprovalService/ListPending"} {
		if code, body := get(t, g, path+q); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	if code, _ := get(t, g, "/portcullis.v1.ExecutionService/Begin"+q); code == http.StatusOK {
		t.Error("GET Begin succeeded: a write must need POST")
	}
}
