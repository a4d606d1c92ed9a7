package test

import (
	"context"
	"fmt"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A contract with intent_scope: session matches a retry without an
// operation key only within the MCP session: a reconnect (a new session)
// is a new execution and a second effect. The default scope (the agent)
// gives the reconnect the stored result and no second effect.
func TestMCPIntentScopeSessionReconnectIsNew(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, fmt.Sprintf(`  session_job:
    channel: http
    target: %s/session-jobs
    timeout: 5s
    retry: idempotency_key
    match_window: 10m
    intent_scope: session
`, tg.URL)...)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startMCPGateway(t, cfg, "")
	session := func() *sdk.ClientSession {
		t.Helper()
		s, err := mcpLegacySession(g, agentToken)
		if err != nil {
			t.Fatal(err)
		}
		if s.ID() == "" {
			t.Fatal("a 2025-11-25 session has no Mcp-Session-Id")
		}
		return s
	}
	call := func(s *sdk.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		r, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return structured(t, r)
	}
	want := func(step string, n int32) {
		t.Helper()
		if got := tg.performed.Load(); got != n {
			t.Fatalf("%s: target performed %d, want %d", step, got, n)
		}
	}

	// The same reconnect (close, then a new session, no operation key),
	// first with the default (agent) scope: it attaches.
	s3 := session()
	p1 := call(s3, "create_payment", map[string]any{"amount": 3})
	s3.Close()
	s4 := session()
	defer s4.Close()
	p2 := call(s4, "create_payment", map[string]any{"amount": 3})
	if p1["state"] != "completed" || p2["execution_id"] != p1["execution_id"] {
		t.Fatalf("agent scope, new session: %v then %v", p1, p2)
	}
	want("agent scope, new session", 1)

	// intent_scope: session: the reconnect is a new execution.
	s1 := session()
	first := call(s1, "session_job", map[string]any{"n": 1})
	if first["state"] != "completed" {
		t.Fatalf("session scope: %v", first)
	}
	s1.Close()
	s2 := session()
	defer s2.Close()
	again := call(s2, "session_job", map[string]any{"n": 1})
	if again["state"] != "completed" || again["execution_id"] == first["execution_id"] {
		t.Fatalf("session scope, new session: %v after %v, want a new execution", again, first)
	}
	want("session scope, new session", 3)
}
