package test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The default intent scope is the authenticated agent: an SDK client that
// reconnects with a NEW session (here on another gateway) and retries
// without an operation key gets the stored result; the target counts one
// effect. A genuinely new operation (a new key) is a second effect.
func TestMCPReconnectWithNewSessionGetsStoredResult(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	ctx := context.Background()
	args := map[string]any{"release_id": "re-1"}

	s1, err := mcpLegacySession(g1, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s1.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	first := structured(t, r)
	s1.Close() // the agent restarts before it could use the answer

	s2, err := mcpLegacySession(g2, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.ID() == "" || s2.ID() == s1.ID() {
		t.Fatalf("sessions %q and %q: want two stateful sessions", s1.ID(), s2.ID())
	}
	r, err = s2.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	retry := structured(t, r)
	if retry["state"] != "completed" || retry["execution_id"] != first["execution_id"] || tg.performed.Load() != 1 {
		t.Fatalf("retry in a new session: %v (first %v), target performed %d", retry, first, tg.performed.Load())
	}
	// A stateless (2026-07-28) client of the same agent: the same answer.
	s3, err := mcpSession(t, g1, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	r, err = s3.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if rec := structured(t, r); rec["execution_id"] != first["execution_id"] || tg.performed.Load() != 1 {
		t.Fatalf("stateless retry: %v, target performed %d", rec, tg.performed.Load())
	}
	// A new operation key is a new operation: a second effect.
	r, err = s2.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: args, Meta: sdk.Meta{"io.portcullis/operation-key": "deploy-again-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec := structured(t, r); rec["state"] != "completed" || rec["execution_id"] == first["execution_id"] || tg.performed.Load() != 2 {
		t.Fatalf("new operation key: %v, target performed %d", rec, tg.performed.Load())
	}
}

// Both generations: server/discover lists 2026-07-28; the Go SDK client
// speaks stateless 2026-07-28 by default and tools/call works; a retry on
// the other gateway is linked by its operation key; every call's JSON-RPC
// id is in its correlation.
func TestMCPBothGenerations(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	ctx := context.Background()

	h, body := modernRequest(7, "server/discover", "", nil, nil, false)
	disc := rawPost(t, g1, agentToken, h, body)
	res, _ := disc.message(t)["result"].(map[string]any)
	versions := fmt.Sprint(res["supportedVersions"])
	if disc.code != http.StatusOK || !strings.Contains(versions, "2026-07-28") || !strings.Contains(versions, "2025-11-25") {
		t.Fatalf("server/discover: %d %s", disc.code, disc.body)
	}

	s, err := mcpSession(t, g1, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" || s.ID() != "" {
		t.Fatalf("Go SDK client negotiated %q with session %q; want stateless 2026-07-28", v, s.ID())
	}
	tg.delay.Store(int64(100e6))
	meta := sdk.Meta{"io.portcullis/operation-key": "gen-op-1"}
	r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "create_payment", Arguments: map[string]any{"amount": 5}, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	first := structured(t, r)
	if first["state"] != "completed" || tg.performed.Load() != 1 {
		t.Fatalf("stateless tools/call: %v", first)
	}
	id := first["execution_id"].(string)
	if x := getExecution(t, g1, id); x.GetCorrelation().GetJsonrpcId() == "" {
		t.Fatalf("no JSON-RPC id in the correlation: %v", x.GetCorrelation())
	}
	// The retry through the other gateway, by hand, with JSON-RPC id 4242.
	msg := modernCall(t, g2, agentToken, 4242, "create_payment", map[string]any{"amount": 5}, map[string]any{"io.portcullis/operation-key": "gen-op-1"}, false)
	if rec := resultRecord(t, msg); rec["execution_id"] != id || tg.performed.Load() != 1 {
		t.Fatalf("retry on the other gateway: %v, target performed %d", rec, tg.performed.Load())
	}
	var ids []string
	for _, ev := range subjectEvents(t, ledgerStream(t, g1), "pc.>") {
		if c := ev.GetExecutionChanged().GetCorrelation(); c != nil && ev.GetExecutionChanged().GetExecution().GetExecutionId() == id {
			ids = append(ids, c.GetJsonrpcId())
		}
	}
	if !slices.Contains(ids, "4242") || slices.Contains(ids, "") {
		t.Fatalf("JSON-RPC ids recorded for %s: %q", id, ids)
	}
}

// A session is bound to the agent that opened it: another agent's token
// presenting its Mcp-Session-Id (POST, or GET with Last-Event-ID; on the
// owner or on another gateway) is refused and sees nothing.
func TestMCPSessionBoundToAgent(t *testing.T) {
	tg := newTarget(t)
	cfg := identityConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	sid := rawSession(t, g1, agentToken)
	r := rawPost(t, g1, agentToken, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy_release","arguments":{"release_id":"bound-1"}}}`)
	if r.code != http.StatusOK || !strings.Contains(r.body, "execution_id") {
		t.Fatalf("owner's call: %d %s", r.code, r.body)
	}
	for _, g := range []string{"owner", "other gateway"} {
		gw := g1
		if g == "other gateway" {
			gw = g2
		}
		r := rawPost(t, gw, otherToken, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		if (r.code != http.StatusForbidden && r.code != http.StatusNotFound) || strings.Contains(r.body, "deploy_release") {
			t.Fatalf("%s: another agent's POST on the session: %d %s", g, r.code, r.body)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+gw.Addr+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+otherToken)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Last-Event-ID", "0_0")
		resp, err := freshConn.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		resp.Body.Close()
		if (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound) || strings.Contains(string(buf[:n]), "execution_id") {
			t.Fatalf("%s: another agent's resumption: %d %s", g, resp.StatusCode, buf[:n])
		}
	}
	// The owner still works.
	if r := rawPost(t, g2, agentToken, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); r.code != http.StatusOK || !strings.Contains(r.body, "deploy_release") {
		t.Fatalf("the owning agent through the other gateway: %d %s", r.code, r.body)
	}
}
