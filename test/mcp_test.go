package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/server"
)

const agentToken = "agent-7-secret-token"

// target is a real HTTP API on 127.0.0.1 that counts what it performs. It
// honours Idempotency-Key (a repeated key performs nothing and answers the
// first answer) and has a status endpoint per key.
type target struct {
	*httptest.Server
	performed atomic.Int32
	seen      atomic.Int32 // requests received, including repeats
	finished  atomic.Int32 // first requests whose work is done
	delay     atomic.Int64 // nanoseconds each first request takes
	mu        sync.Mutex
	done      map[string]string // key → answer
}

func newTarget(t *testing.T) *target { return newTargetB(t) }

func newTargetB(t testing.TB) *target {
	tg := &target{done: map[string]string{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/status/") {
			tg.mu.Lock()
			ans, ok := tg.done[strings.TrimPrefix(r.URL.Path, "/status/")]
			tg.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, ans)
			return
		}
		tg.seen.Add(1)
		key := r.Header.Get("Idempotency-Key")
		tg.mu.Lock()
		ans, again := tg.done[key]
		if !again {
			tg.performed.Add(1)
			ans = fmt.Sprintf(`{"release":"r-%d","key":%q}`, tg.performed.Load(), key)
			tg.done[key] = ans
		}
		tg.mu.Unlock()
		if !again {
			time.Sleep(time.Duration(tg.delay.Load())) // the target's work
			tg.finished.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, ans)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func mcpConfig(t *testing.T, tg *target) string { return mcpConfigB(t, tg) }

func mcpConfigB(t testing.TB, tg *target) string {
	sum := sha256.Sum256([]byte(agentToken))
	cfg := fmt.Sprintf(`
agents:
  agent-7: {token_sha256: %s}
tools:
  deploy_release:
    description: Deploy a release
    channel: http
    method: POST
    target: %[2]s/releases
    status_url: %[2]s/status/{execution_id}
    timeout: 300ms
    input_schema: {type: object, properties: {release_id: {type: string}}, required: [release_id]}
    retry: status_query
    match_window: 1h
  create_payment:
    channel: http
    target: %[2]s/payments
    timeout: 300ms
    retry: idempotency_key
    match_window: 10m
  rotate_credentials:
    channel: http
    target: %[2]s/rotate
    timeout: 300ms
    retry: irreversible
    match_window: until_resolved
  contract_only:
    retry: idempotency_key
    match_window: 10m
`, hex.EncodeToString(sum[:]), tg.URL)
	p := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func startMCPGatewayB(t testing.TB, cfg string) *server.Gateway { return startMCPGatewayTB(t, cfg, "") }

func startMCPGateway(t *testing.T, cfg, natsURL string) *server.Gateway {
	return startMCPGatewayTB(t, cfg, natsURL)
}

func startMCPGatewayTB(t testing.TB, cfg, natsURL string) *server.Gateway {
	return startMCPGatewayLog(t, cfg, natsURL, io.Discard)
}

func startMCPGatewayLog(t testing.TB, cfg, natsURL string, logs io.Writer) *server.Gateway {
	return startMCPGatewayWith(t, cfg, natsURL, logs, func(*server.Options) {})
}

// startMCPGatewayWith starts an MCP gateway with options set by set.
func startMCPGatewayWith(t testing.TB, cfg, natsURL string, logs io.Writer, set func(*server.Options)) *server.Gateway {
	var creds string
	if natsURL != "" {
		creds = credsFor(t, natsURL)
	}
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: cfg, NatsURL: natsURL, NatsListen: "127.0.0.1:-1", NatsCreds: creds,
		FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RootKey: rootKeyOf(natsURL),
	}
	set(&o)
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	remember(g)
	t.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

// bearer authenticates an agent. Each session of the tests is its own
// agent process: with its own transport it shares no connection with
// another session (a later request on the same connection is evidence of
// receipt).
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.rt == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return b.rt.RoundTrip(r)
}

func agentTransport(token string) http.RoundTripper {
	return bearer{token: token, rt: http.DefaultTransport.(*http.Transport).Clone()}
}

func mcpSessionB(g *server.Gateway) (*sdk.ClientSession, error) {
	return mcpSession(nil, g, agentToken)
}

func mcpSession(_ *testing.T, g *server.Gateway, token string) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	return c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: "http://" + g.Addr + "/mcp", HTTPClient: &http.Client{Transport: agentTransport(token)}, MaxRetries: -1,
	}, nil)
}

// mcpLegacySession opens a stateful 2025-11-25 session (the Go SDK
// client speaks stateless 2026-07-28 by default).
func mcpLegacySession(g *server.Gateway, token string) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	return c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: "http://" + g.Addr + "/mcp", HTTPClient: &http.Client{Transport: agentTransport(token)}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

func structured(t *testing.T, r *sdk.CallToolResult) map[string]any {
	t.Helper()
	m, ok := r.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structured content: %+v", r)
	}
	return m
}

// The agent's connection is cut while the target is still working; the
// retry (a new request id) attaches, the target still counts 1, and once
// the target answered the retry gets the stored result. Also through a
// second gateway sharing the ledger.
func TestMCPConnectionCutThenRetryAttaches(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	for i, retryVia := range []*server.Gateway{g1, g2} {
		tg.delay.Store(int64(200 * time.Millisecond))
		s1, err := mcpSession(t, g1, agentToken)
		if err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"release_id": fmt.Sprintf("2026.07.%d", 22+i)}
		meta := sdk.Meta{"io.portcullis/intent-scope": "run:5f8097"}
		want := int32(i + 1)
		reached := func() bool { return tg.seen.Load() >= want }
		cctx, cancel := cutWhen(reached)
		_, err = s1.CallTool(cctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: args, Meta: meta})
		cancel()
		if err == nil {
			t.Fatal("the first call should have been cut")
		}
		if !reached() || tg.finished.Load() >= want {
			t.Fatalf("the cut did not come while the target was working (received %d, finished %d)", tg.seen.Load(), tg.finished.Load())
		}
		s1.Close()
		s2, err := mcpSession(t, retryVia, agentToken)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s2.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		rec := structured(t, res)
		if rec["state"] != "completed" || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"release":"r-`) {
			t.Fatalf("retry %d: %+v", i, rec)
		}
		if n := tg.performed.Load(); n != int32(i+1) {
			t.Fatalf("target performed %d deploys, want %d", n, i+1)
		}
		s2.Close()
	}
	if tg.seen.Load() != 2 {
		t.Fatalf("target received %d requests, want 2", tg.seen.Load())
	}
}

// cutWhen returns a context the agent's call runs under: it is cancelled
// (the connection cut) as soon as reached reports that the call got where
// the test wants the cut, or after waitMax when it never does (the test
// then checks reached and fails).
func cutWhen(reached func() bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for stop := time.Now().Add(waitMax); !reached() && time.Now().Before(stop); {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	return ctx, cancel
}

// waitMax bounds every wait on observable state in these tests.
const waitMax = 30 * time.Second

// waitFor waits until cond holds (bounded by waitMax).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for stop := time.Now().Add(waitMax); !cond(); {
		if time.Now().After(stop) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Timeout after dispatch: idempotency_key resends with the same key (the
// target sees the key twice and performs once); status_query resolves
// through the status URL without a second request; irreversible stops at
// needs_review and sends nothing.
func TestMCPUnknownOutcomeRecovery(t *testing.T) {
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	s, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args, Meta: sdk.Meta{"io.portcullis/operation-key": tool + "-op-1"}})
		if err != nil {
			t.Fatal(err)
		}
		return structured(t, r)
	}
	for _, tc := range []struct {
		tool               string
		wantRetry          string
		seenAfter, perfAft int32
	}{
		{"create_payment", "completed", 2, 1},
		{"deploy_release", "completed", 1, 1},
		{"rotate_credentials", "needs_review", 1, 1},
	} {
		tg.seen.Store(0)
		tg.performed.Store(0)
		tg.delay.Store(int64(700 * time.Millisecond)) // longer than the 300ms dispatch timeout
		args := map[string]any{"release_id": "r1", "n": 1}
		if first := call(tc.tool, args); first["state"] != "outcome_unknown" {
			t.Fatalf("%s first call: %v", tc.tool, first)
		}
		waitFor(t, "the target finishes its work", func() bool { return tg.finished.Load() >= tg.performed.Load() })
		tg.delay.Store(0)
		retry := call(tc.tool, args)
		if retry["state"] != tc.wantRetry {
			t.Fatalf("%s retry: %v", tc.tool, retry)
		}
		// Every attached answer says why, the resend too.
		if why, _ := retry["why"].(string); why == "" || (tc.tool == "create_payment" && !strings.Contains(why, "resent with the same Idempotency-Key")) {
			t.Fatalf("%s retry without its reason: %v", tc.tool, retry)
		}
		if tg.seen.Load() != tc.seenAfter || tg.performed.Load() != tc.perfAft {
			t.Fatalf("%s: target saw %d requests and performed %d, want %d and %d", tc.tool, tg.seen.Load(), tg.performed.Load(), tc.seenAfter, tc.perfAft)
		}
	}
}

// Bad input: no token or a wrong one, unknown tools, arguments failing the
// schema, contract-only tools: clear errors and nothing dispatched.
func TestMCPBadInput(t *testing.T) {
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	for _, tok := range []string{"", "wrong"} {
		if _, err := mcpSession(t, g, tok); err == nil {
			t.Fatalf("token %q was accepted", tok)
		}
	}
	s, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 3 {
		t.Fatalf("tools/list: %d tools, want the 3 with a channel", len(tools.Tools))
	}
	ctx := context.Background()
	if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "drop_database"}); err == nil {
		t.Fatal("unknown tool called")
	}
	r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": 7}})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if r == nil || !r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "input schema") {
		t.Fatalf("schema violation: %+v", r)
	}
	if tg.seen.Load() != 0 {
		t.Fatalf("bad input reached the target %d times", tg.seen.Load())
	}
}

// Per-use approval: the call waits in awaiting_approval; a retry shows the
// same pending approval (no second one); approved, it is dispatched once;
// denied, retries get the denial. Through `portcullis approvals`.
func TestMCPPerUseApproval(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	perUse := strings.Replace(string(b), "    retry: irreversible\n", "    retry: irreversible\n    approval: per_use\n", 1)
	if err := os.WriteFile(cfg, []byte(perUse), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startMCPGateway(t, cfg, "")
	s, err := mcpLegacySession(g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	call := func(cred string) map[string]any {
		t.Helper()
		r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "rotate_credentials", Arguments: map[string]any{"credential": cred}})
		if err != nil {
			t.Fatal(err)
		}
		return structured(t, r)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, append(args, "--addr", "http://"+g.Addr)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	first := call("db-prod")
	second := call("db-prod")
	if first["state"] != "awaiting_approval" || second["state"] != "awaiting_approval" || first["execution_id"] != second["execution_id"] {
		t.Fatalf("pending approval: %v then %v", first, second)
	}
	id := first["execution_id"].(string)
	if list := cli("approvals", "list"); strings.Count(list, "act_") != 1 || !strings.Contains(list, id) {
		t.Fatalf("pending list:\n%s", list)
	}
	cli("approvals", "approve", id)
	if r := call("db-prod"); r["state"] != "completed" || tg.performed.Load() != 1 {
		t.Fatalf("after approval: %v, performed %d", r, tg.performed.Load())
	}
	// Once the result is delivered (evidence: a later request in the same
	// session), the same call is a new operation, and per_use asks a person
	// again.
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, id, "STATE_DELIVERED")
	if r := call("db-prod"); r["state"] != "awaiting_approval" || r["execution_id"] == id || tg.seen.Load() != 1 {
		t.Fatalf("the same call after delivery: %v, target saw %d", r, tg.seen.Load())
	}
	other := call("db-staging")["execution_id"].(string)
	cli("approvals", "deny", other, "--reason", "not during the freeze")
	if r := call("db-staging"); r["state"] != "denied" || !strings.Contains(r["why"].(string), "freeze") {
		t.Fatalf("retry after denial: %v", r)
	}
	if tg.seen.Load() != 1 {
		t.Fatalf("a denied execution reached the target")
	}
}

// Raw protocol abuse: malformed JSON-RPC and oversized bodies get clear
// errors; a secret-bearing argument never reaches the stream in the clear.
func TestMCPMalformedAndSecrets(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	b, _ := os.ReadFile(cfg)
	withSecret := strings.Replace(string(b), "    retry: status_query\n", "    retry: status_query\n    fingerprint: {secrets: [token]}\n", 1)
	if err := os.WriteFile(cfg, []byte(withSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	g := startMCPGatewayLog(t, cfg, "", &logs)
	post := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, out := post(`{"jsonrpc":"2.0","id":1,"method":`); code < 400 {
		t.Fatalf("malformed JSON-RPC: %d %s", code, out)
	}
	if code, _ := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy_release","arguments":{"blob":"` + strings.Repeat("x", 2<<20) + `"}}}`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", code)
	}
	s, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	secret := "tok-very-secret-9f8e7d"
	visible := "release-visible-5c1a"
	if _, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": visible, "token": secret}}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range subjectEvents(t, ledgerStream(t, g), "pc.>") {
		if strings.Contains(ev.String(), secret) {
			t.Fatalf("secret in event %s", ev.GetEventId())
		}
	}
	scanStored(t, g, secret, visible)
	if l := logs.String(); len(l) == 0 || strings.Contains(l, secret) {
		t.Fatalf("logs (%d bytes) hold the secret, or nothing was logged", len(l))
	}
}

// waitState polls the ledger until the execution reaches state (bounded).
func waitState(t *testing.T, g *server.Gateway, id, state string) {
	t.Helper()
	deadline := time.Now().Add(waitMax) // a DELIVERED append may take up to markDeliveredMax (10 s) under load
	for {
		x, err := g.Ledger.Get(context.Background(), id)
		if err == nil && x.GetState().String() == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never reached %s (%v, %v)", id, state, x.GetState(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A locked vault refuses every action before anything is recorded or sent.
func TestMCPLockedVaultRefusesEverything(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append([]byte("vault: {locked: true}\n"), b...), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startMCPGateway(t, cfg, "")
	s, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "vault is locked") || tg.seen.Load() != 0 {
		t.Fatalf("locked vault: %+v, target saw %d", r, tg.seen.Load())
	}
	if n := streamCount(t, ledgerStream(t, g)); n != 0 {
		t.Fatalf("a locked vault recorded %d events", n)
	}
}

// Upstream MCP servers: their tools are proxied, each still needing a
// contract; a tool without one is listed as unavailable, with the reason,
// and calling it is refused.
func TestMCPUpstreamProxy(t *testing.T) {
	var charges atomic.Int32
	var keys sync.Map // idempotency key → calls
	up := sdk.NewServer(&sdk.Implementation{Name: "payments", Version: "1"}, nil)
	up.AddTool(&sdk.Tool{Name: "charge", Description: "Charge a card", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n := charges.Add(1)
			keys.Store(req.Params.GetMeta()[mcpIdempotencyKey], n)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("charge ch_%d ok", n)}}}, nil
		})
	up.AddTool(&sdk.Tool{Name: "decline", Description: "Always declines", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: 4001, Message: "card declined"}
		})
	// An uncontracted upstream tool with the name of a contracted http
	// tool: the contracted one keeps the name.
	up.AddTool(&sdk.Tool{Name: "deploy_release", Description: "the upstream's own", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			t.Error("the upstream's deploy_release was called")
			return &sdk.CallToolResult{}, nil
		})
	up.AddTool(&sdk.Tool{Name: "dump", Description: "A long answer", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", 100_000)}}}, nil
		})
	up.AddTool(&sdk.Tool{Name: "refund", Description: "Refund", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			t.Error("refund reached the upstream")
			return &sdk.CallToolResult{}, nil
		})
	// The upstream's handler can be replaced, as a restart replaces it: the
	// sessions it knew are gone (404 "session not found").
	var handler atomic.Pointer[sdk.StreamableHTTPHandler]
	restart := func() {
		handler.Store(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	}
	restart()
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.Load().ServeHTTP(w, r) }))
	t.Cleanup(upSrv.Close) // after the gateway (cleanups run last-in first-out)

	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	b, _ := os.ReadFile(cfg)
	extra := fmt.Sprintf("  charge:\n    channel: mcp\n    upstream: payments\n    retry: idempotency_key\n    match_window: 10m\n"+
		"  decline:\n    channel: mcp\n    upstream: payments\n    retry: irreversible\n    match_window: 10m\n"+
		"  dump:\n    channel: mcp\n    upstream: payments\n    retry: read_only\n"+
		"upstreams:\n  payments: {url: %s}\n", upSrv.URL)
	if err := os.WriteFile(cfg, append(b, []byte(extra)...), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startMCPGateway(t, cfg, "")
	s, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tl := range tools.Tools {
		desc[tl.Name] = tl.Description
	}
	if desc["charge"] != "Charge a card" || !strings.Contains(desc["refund"], "no contract") || strings.Contains(desc["deploy_release"], "unavailable") {
		t.Fatalf("tools/list: %v", desc)
	}
	if r, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "up-1"}}); err != nil || r.IsError || tg.performed.Load() != 1 {
		t.Fatalf("the contracted deploy_release beside an upstream's: %+v %v (target performed %d)", r, err, tg.performed.Load())
	}
	r, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || r.Content[0].(*sdk.TextContent).Text != "charge ch_1 ok" || charges.Load() != 1 {
		t.Fatalf("proxied call: %+v", r)
	}
	rec, _ := r.Meta[MetaExecutionKey].(map[string]any)
	if rec["state"] != "completed" {
		t.Fatalf("no execution record on the proxied result: %v", r.Meta)
	}
	// The upstream got the execution id as its idempotency key.
	if n, ok := keys.Load(rec["execution_id"]); !ok || n != int32(1) {
		t.Fatalf("the upstream saw no idempotency key %v in _meta", rec["execution_id"])
	}
	// A JSON-RPC error is the upstream's answer: an observed (error)
	// result, not an unknown outcome.
	r, err = s.CallTool(context.Background(), &sdk.CallToolParams{Name: "decline", Arguments: map[string]any{"amount": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := r.Meta[MetaExecutionKey].(map[string]any); !r.IsError || rec["state"] != "completed" || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "upstream error 4001: card declined") {
		t.Fatalf("a JSON-RPC error from the upstream: %+v %v", r, r.Meta)
	}
	// An answer over the cap stays a result the agent can read, and says
	// it was cut.
	r, err = s.CallTool(context.Background(), &sdk.CallToolParams{Name: "dump", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := r.Content[0].(*sdk.TextContent).Text; r.IsError || !strings.HasPrefix(text, "éé") || !strings.Contains(text, "[truncated: the upstream's answer was") {
		t.Fatalf("a long upstream answer: error %v, %d bytes, ends %q", r.IsError, len(text), text[max(len(text)-80, 0):])
	}
	// The upstream restarted: the gateway's session is gone (404, nothing
	// run); the call opens a new one and is sent once, not recorded unknown.
	restart()
	r, err = s.CallTool(context.Background(), &sdk.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 6}})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || r.Content[0].(*sdk.TextContent).Text != "charge ch_2 ok" || charges.Load() != 2 {
		t.Fatalf("a call after the upstream restarted: %+v (%d charges)", r, charges.Load())
	}
	r, err = s.CallTool(context.Background(), &sdk.CallToolParams{Name: "refund", Arguments: map[string]any{"id": "ch_1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "refused") {
		t.Fatalf("uncontracted upstream tool: %+v", r)
	}
}

const (
	MetaExecutionKey  = "io.portcullis/execution"
	mcpIdempotencyKey = "io.portcullis/idempotency-key"
)

// A stateful session opened on one gateway is served through any other:
// a request carrying its Mcp-Session-Id is forwarded to the gateway that
// holds it (recorded in the ledger), instead of "session not found".
func TestMCPSessionOnAnyGateway(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGatewayTB(t, cfg, g1.NatsURL)
	sid := legacyOpen(t, g1)
	waitStatus(t, g2, sid, http.StatusOK, "tools/list through the other gateway")
	if r := legacyPost(t, g2, sid, toolsList); !strings.Contains(r.body, "deploy_release") {
		t.Fatalf("tools/list through the other gateway: %s", r.body)
	}
}

// A Go SDK agent's ping (its keep-alive) is answered in both protocol
// generations; unauthenticated, it is refused like any request. The SDK's
// own client sends a stateless ping without the _meta protocol version
// its stateless server requires, which closed keep-alive sessions.
func TestMCPPing(t *testing.T) {
	g := startMCPGateway(t, mcpConfig(t, newTarget(t)), "")
	for name, open := range map[string]func() (*sdk.ClientSession, error){
		"2026-07-28": func() (*sdk.ClientSession, error) { return mcpSession(t, g, agentToken) },
		"2025-11-25": func() (*sdk.ClientSession, error) { return mcpLegacySession(g, agentToken) },
	} {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(context.Background(), nil); err != nil {
			t.Errorf("%s: ping: %v", name, err)
		}
		s.Close()
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("ping without a token: %d, want 401", resp.StatusCode)
	}
}
