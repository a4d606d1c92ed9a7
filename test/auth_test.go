package test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// callerRoles are the callers of the auth tests and their roles.
var callerRoles = map[string][]auth.Role{
	"deploy-runner": {auth.Executor},
	"other-runner":  {auth.Executor},
	"alice":         {auth.Approver},
	"bob":           {auth.Approver},
	"finance-bot":   {auth.Finance},
	"cfo":           {auth.BudgetAdmin},
	"analyst-1":     {auth.Analyst},
}

// authConfig writes the test config with a callers: section, and returns
// its path and each caller's freshly made token.
func authConfig(t *testing.T) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var b strings.Builder
	b.WriteString(testConfig)
	b.WriteString("  pay_ops:\n    retry: idempotency_key\n    match_window: 10m\n    budget: {account: ops, amount: $.amount, currency: GBP}\ncallers:\n")
	for name, roles := range callerRoles {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		tok := hex.EncodeToString(raw) // openssl rand -hex 32
		tokens[name] = tok
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&b, "  %s: {token_sha256: %s, roles: [%s]", name, hex.EncodeToString(sum[:]), roles[0])
		switch name {
		case "deploy-runner":
			b.WriteString(", acts_for: [agent-7]")
		case "other-runner":
			b.WriteString(", acts_for: [agent-9]")
		}
		b.WriteString("}\n")
	}
	p := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, tokens
}

// rpc posts a JSON body to a procedure as plain Connect JSON and returns
// the Connect code ("ok" on success) and the decoded answer.
func rpc(t *testing.T, addr, procedure, authorization, body string) (string, map[string]any) {
	t.Helper()
	status, raw, _ := request(t, http.MethodPost, "http://"+addr+procedure, authorization, body)
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %d %s", procedure, status, raw)
		}
	}
	if status == http.StatusOK {
		return "ok", out
	}
	code, _ := out["code"].(string)
	return code, out
}

// request sends one HTTP request (a JSON body for a POST), with the
// Authorization header when one is given, and returns the status, the
// body and the headers of the answer.
func request(t *testing.T, method, url, authorization, body string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if method == http.MethodPost {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, raw, res.Header
}

// streamHeads returns the last sequence of the executions and budget
// streams, read as the analyst with the credentials in the serving
// gateway's data dir.
func streamHeads(t *testing.T, natsURL, dataDir string) [2]uint64 {
	t.Helper()
	nc := natsConnectDir(t, natsURL, dataDir, natsauth.Analyst)
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var heads [2]uint64
	for i, name := range []string{ledger.ExecutionsStream, keeper.Stream} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		heads[i] = info.State.LastSeq
	}
	return heads
}

// serveWithCallers runs `portcullis serve` with a callers: config and waits
// until it answers an analyst; it returns the address, the NATS URL and
// the data dir (which holds the NATS credentials).
func serveWithCallers(t *testing.T, cfg, analystToken string) (string, string, string) {
	t.Helper()
	dataDir, addr := t.TempDir(), freeAddr(t)
	cmd := exec.Command(binary, "serve", "--data-dir", dataDir, "--listen", addr, "--config", cfg, "--nats-listen", "127.0.0.1:-1")
	stderr := serveStderr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	c := svc.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req := connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1})
		req.Header().Set("Authorization", "Bearer "+analystToken)
		if _, err := c.ListExecutions(context.Background(), req); err == nil {
			url, err := os.ReadFile(filepath.Join(dataDir, "nats.url"))
			if err != nil {
				t.Fatal(err)
			}
			return addr, strings.TrimSpace(string(url)), dataDir
		}
	}
	t.Fatalf("portcullis serve did not come up on %s; the end of its log:\n%s", addr, stderr.tail(4096))
	return "", "", ""
}

// Every RPC of every service refuses a call without a valid token
// (unauthenticated) and a call from a role that may not make it
// (permission_denied), and no refusal appends anything, although each body
// would have changed the ledger had the call been allowed.
func TestAuthEveryRPCRefused(t *testing.T) {
	cfg, tokens := authConfig(t)
	addr, natsURL, dataDir := serveWithCallers(t, cfg, tokens["analyst-1"])
	as := func(name string) string { return "Bearer " + tokens[name] }
	must := func(code string, out map[string]any) map[string]any {
		t.Helper()
		if code != "ok" {
			t.Fatalf("setup call: %s %v", code, out)
		}
		return out
	}
	// A pending execution, an account and an open hold that the refused
	// calls would move.
	x := must(rpc(t, addr, svc.ExecutionServiceBeginProcedure, as("deploy-runner"), `{"action": {"actor": "agent-7", "tool": "rotate_credentials",
		"target": "vault", "method": "POST", "arguments": {"credential": "db-prod"}, "intentScope": "run:1"}}`))
	id := x["execution"].(map[string]any)["executionId"].(string)
	must(rpc(t, addr, svc.BudgetServiceSetLimitProcedure, as("cfo"), `{"account": "ops", "limit": 100000, "currency": "GBP"}`))
	must(rpc(t, addr, svc.BudgetServiceReserveProcedure, as("deploy-runner"), `{"account": "ops", "operationKey": "op-held", "requestDigest": "sha256:h", "amount": 10}`))

	bodies := map[string]string{
		svc.ExecutionServiceBeginProcedure: `{"action": {"actor": "agent-7", "tool": "create_payment", "target": "pay", "method": "POST",
			"arguments": {"order": 1}, "intentScope": "run:1"}}`,
		svc.ExecutionServiceResolveProcedure:        fmt.Sprintf(`{"executionId": %q, "resolution": "RESOLUTION_NOT_EXECUTED", "evidence": "x"}`, id),
		svc.BudgetServiceSetLimitProcedure:          `{"account": "ops", "limit": 1, "currency": "GBP"}`,
		svc.BudgetServiceReserveProcedure:           `{"account": "ops", "operationKey": "op-new", "requestDigest": "sha256:n", "amount": 1}`,
		svc.BudgetServiceSettleProcedure:            `{"account": "ops", "operationKey": "op-held", "amount": 10, "evidence": {"note": "x"}}`,
		svc.BudgetServiceReleaseProcedure:           `{"account": "ops", "operationKey": "op-held", "evidence": {"note": "x"}}`,
		svc.BudgetServiceGetAccountProcedure:        `{"account": "ops"}`,
		svc.BudgetServiceListHoldsProcedure:         `{"account": "ops"}`,
		svc.BudgetServiceListDecisionsProcedure:     `{"account": "ops"}`,
		svc.ExecutionServiceListExecutionsProcedure: `{}`,
		svc.ApprovalServiceListPendingProcedure:     `{}`,
		svc.AuditServiceListQuarantineProcedure:     `{"pageSize": 10}`,
	}
	body := func(proc string) string {
		if b, ok := bodies[proc]; ok {
			return b
		}
		return fmt.Sprintf(`{"executionId": %q}`, id)
	}
	before := streamHeads(t, natsURL, dataDir)
	procs := auth.Procedures()
	if len(procs) != 23 {
		t.Fatalf("%d procedures; the test expects the 23 RPCs of the four services", len(procs))
	}
	// The quarantine list (added with the trust model) is for analysts only.
	if r := auth.RolesFor(svc.AuditServiceListQuarantineProcedure); !slices.Equal(r, []auth.Role{auth.Analyst}) {
		t.Fatalf("ListQuarantine roles %v, want [analyst]", r)
	}
	if code, out := rpc(t, addr, svc.AuditServiceListQuarantineProcedure, as("analyst-1"), body(svc.AuditServiceListQuarantineProcedure)); code != "ok" {
		t.Fatalf("ListQuarantine as analyst-1: %s %v", code, out)
	}
	for _, proc := range procs {
		for _, h := range []string{"", "Bearer " + strings.Repeat("0", 64), "Basic YWxpY2U6c2VjcmV0", "Bearer"} {
			if code, out := rpc(t, addr, proc, h, body(proc)); code != "unauthenticated" {
				t.Errorf("%s with Authorization %q: %s %v, want unauthenticated", proc, h, code, out)
			}
		}
		for name, roles := range callerRoles {
			if slices.ContainsFunc(auth.RolesFor(proc), func(r auth.Role) bool { return slices.Contains(roles, r) }) {
				continue
			}
			if code, out := rpc(t, addr, proc, as(name), body(proc)); code != "permission_denied" {
				t.Errorf("%s as %s: %s %v, want permission_denied", proc, name, code, out)
			}
		}
	}
	// An executor outside its scope: another actor's execution, Begin for
	// an actor it does not act for, an account its tools do not name.
	scoped := []struct{ proc, body string }{
		{svc.ExecutionServiceMarkDispatchedProcedure, body(svc.ExecutionServiceMarkDispatchedProcedure)},
		{svc.ExecutionServiceRecordOutcomeUnknownProcedure, body(svc.ExecutionServiceRecordOutcomeUnknownProcedure)},
		{svc.ExecutionServiceGetExecutionProcedure, body(svc.ExecutionServiceGetExecutionProcedure)},
		{svc.ExecutionServiceBeginProcedure, body(svc.ExecutionServiceBeginProcedure)},
		{svc.BudgetServiceReserveProcedure, `{"account": "hr", "operationKey": "op-new", "requestDigest": "sha256:n", "amount": 1}`},
		{svc.BudgetServiceReserveProcedure, `{"account": "ops", "operationKey": "op-new", "requestDigest": "sha256:n", "amount": 1, "override": {"reason": "x"}}`},
	}
	for _, s := range scoped {
		if code, out := rpc(t, addr, s.proc, as("other-runner"), s.body); code != "permission_denied" {
			t.Errorf("%s as other-runner (acts for agent-9): %s %v, want permission_denied", s.proc, code, out)
		}
	}
	if after := streamHeads(t, natsURL, dataDir); after != before {
		t.Fatalf("refused calls moved the streams: %v → %v", before, after)
	}
	// Health stays open.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("health without a token: %d", res.StatusCode)
	}
}

// The attacks of issue 9 item 1, each refused with nothing appended, and
// the honest calls recording the authenticated caller; the CLI with
// --token and $PORTCULLIS_TOKEN.
func TestAuthAttacksAndAuthors(t *testing.T) {
	cfg, tokens := authConfig(t)
	addr, natsURL, dataDir := serveWithCallers(t, cfg, tokens["analyst-1"])
	as := func(name string) string { return "Bearer " + tokens[name] }
	refused := func(what, who, proc, body, want string) {
		t.Helper()
		before := streamHeads(t, natsURL, dataDir)
		if code, out := rpc(t, addr, proc, as(who), body); code != want {
			t.Errorf("%s: %s %v, want %s", what, code, out, want)
		}
		if after := streamHeads(t, natsURL, dataDir); after != before {
			t.Errorf("%s moved the streams: %v → %v", what, before, after)
		}
	}
	ok := func(who, proc, body string) map[string]any {
		t.Helper()
		code, out := rpc(t, addr, proc, as(who), body)
		if code != "ok" {
			t.Fatalf("%s as %s: %s %v", proc, who, code, out)
		}
		return out
	}
	x := ok("deploy-runner", svc.ExecutionServiceBeginProcedure, `{"action": {"actor": "agent-7", "tool": "rotate_credentials",
		"target": "vault", "method": "POST", "arguments": {"credential": "db-prod"}, "intentScope": "run:1"}}`)
	id := x["execution"].(map[string]any)["executionId"].(string)
	exe := fmt.Sprintf(`{"executionId": %q}`, id)

	// Approval bypass: the executor may not authorize or approve its own
	// per_use execution, nor dispatch it unapproved.
	refused("executor Authorize", "deploy-runner", svc.ExecutionServiceAuthorizeProcedure, exe, "permission_denied")
	refused("executor Approve", "deploy-runner", svc.ApprovalServiceApproveProcedure, exe, "permission_denied")
	refused("executor dispatches unapproved", "deploy-runner", svc.ExecutionServiceMarkDispatchedProcedure, exe, "failed_precondition")
	// Self-claimed authors.
	refused("approver claims by", "alice", svc.ApprovalServiceApproveProcedure, fmt.Sprintf(`{"executionId": %q, "by": "cfo"}`, id), "permission_denied")
	refused("approver claims by on Authorize", "alice", svc.ExecutionServiceAuthorizeProcedure, fmt.Sprintf(`{"executionId": %q, "by": "session"}`, id), "permission_denied")
	refused("budget admin claims delegator", "cfo", svc.BudgetServiceSetLimitProcedure, `{"account": "ops", "limit": 5, "currency": "GBP", "delegator": "ceo"}`, "permission_denied")
	refused("budget admin claims override author", "cfo", svc.BudgetServiceReserveProcedure,
		`{"account": "ops", "operationKey": "o", "requestDigest": "sha256:o", "amount": 1, "override": {"by": "ceo", "reason": "x"}}`, "permission_denied")
	// The caller a Begin records is the authenticated one, on the
	// execution's first event and on a retry's ATTACHED.
	refused("executor claims another caller", "deploy-runner", svc.ExecutionServiceBeginProcedure, `{"action": {"actor": "agent-7", "tool": "rotate_credentials",
		"target": "vault", "method": "POST", "arguments": {"credential": "db-prod"}, "intentScope": "run:1"}, "correlation": {"caller": "alice"}}`, "permission_denied")
	ok("deploy-runner", svc.ExecutionServiceBeginProcedure, `{"action": {"actor": "agent-7", "tool": "rotate_credentials",
		"target": "vault", "method": "POST", "arguments": {"credential": "db-prod"}, "intentScope": "run:1"}, "correlation": {"jsonrpcId": "7"}}`)
	inv := ok("analyst-1", svc.AuditServiceInvestigateProcedure, exe)
	var callers []string
	for _, st := range inv["timeline"].([]any) {
		st := st.(map[string]any)
		if ev := st["event"]; ev == "ACCEPTED" || ev == "ATTACHED" {
			callers = append(callers, fmt.Sprint(ev, " ", st["caller"]))
		}
	}
	if want := []string{"ACCEPTED deploy-runner", "ATTACHED deploy-runner"}; !slices.Equal(callers, want) {
		t.Errorf("timeline callers %q, want %q", callers, want)
	}
	// acts_for.
	refused("executor Begin for another actor", "deploy-runner", svc.ExecutionServiceBeginProcedure, `{"action": {"actor": "agent-9", "tool": "create_payment",
		"target": "pay", "method": "POST", "arguments": {"order": 1}, "intentScope": "run:1"}}`, "permission_denied")

	// budget_admin's limit and override record cfo; finance reads them.
	ok("cfo", svc.BudgetServiceSetLimitProcedure, `{"account": "ops", "limit": 100, "currency": "GBP"}`)
	ok("deploy-runner", svc.BudgetServiceReserveProcedure, `{"account": "ops", "operationKey": "op-A", "requestDigest": "sha256:a", "amount": 90}`)
	over := ok("cfo", svc.BudgetServiceReserveProcedure, `{"account": "ops", "operationKey": "op-B", "requestDigest": "sha256:b", "amount": 20, "override": {"reason": "quarter-end"}}`)
	if by := over["decision"].(map[string]any)["override"].(map[string]any)["by"]; by != "cfo" {
		t.Errorf("override recorded by %v, want cfo", by)
	}
	acc := ok("finance-bot", svc.BudgetServiceGetAccountProcedure, `{"account": "ops"}`)
	if d := acc["account"].(map[string]any)["delegator"]; d != "cfo" {
		t.Errorf("limit delegated by %v, want cfo", d)
	}

	// The CLI: an approver lists and approves with --token, then with
	// $PORTCULLIS_TOKEN; finance shows the account; no token is refused.
	cli := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(binary, append(args, "--addr", "http://"+addr)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli(nil, "approvals", "list"); err == nil || !strings.Contains(out, "unauthenticated") || !strings.Contains(out, "--token") {
		t.Fatalf("approvals list without a token: %v\n%s", err, out)
	}
	if out, err := cli(nil, "approvals", "list", "--token", tokens["alice"]); err != nil || !strings.Contains(out, id) {
		t.Fatalf("approvals list --token: %v\n%s", err, out)
	}
	if out, err := cli([]string{"PORTCULLIS_TOKEN=" + tokens["deploy-runner"]}, "approvals", "approve", id); err == nil || !strings.Contains(out, "permission_denied") {
		t.Fatalf("approvals approve as the executor: %v\n%s", err, out)
	}
	if out, err := cli([]string{"PORTCULLIS_TOKEN=" + tokens["alice"]}, "approvals", "approve", id); err != nil || !strings.Contains(out, "STATE_AUTHORIZED by alice") {
		t.Fatalf("approvals approve with $PORTCULLIS_TOKEN: %v\n%s", err, out)
	}
	got := ok("analyst-1", svc.ExecutionServiceGetExecutionProcedure, exe)
	if by := got["execution"].(map[string]any)["authorizedBy"]; by != "alice" {
		t.Errorf("authorized by %v, want alice", by)
	}
	if out, err := cli(nil, "budget", "show", "ops", "--token", tokens["finance-bot"]); err != nil || !strings.Contains(out, "delegated by cfo") {
		t.Fatalf("budget show --token: %v\n%s", err, out)
	}
	if out, err := cli(nil, "budget", "show", "ops", "--token", tokens["deploy-runner"]); err == nil || !strings.Contains(out, "permission_denied") {
		t.Fatalf("budget show as the executor: %v\n%s", err, out)
	}
	// The executor reads its own actor's execution, not another's.
	ok("deploy-runner", svc.ExecutionServiceGetExecutionProcedure, exe)
	refused("other executor reads", "other-runner", svc.ExecutionServiceGetExecutionProcedure, exe, "permission_denied")
}

// Without callers, serve refuses a listener beyond loopback before it opens
// anything.
func TestAuthNoCallersLoopbackOnly(t *testing.T) {
	cfg := writeConfig(t)
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		dataDir := t.TempDir()
		out, err := exec.Command(binary, "serve", "--data-dir", dataDir, "--listen", listen, "--config", cfg, "--nats-listen", "127.0.0.1:-1").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not a loopback address and the config has no callers") {
			t.Fatalf("serve --listen %s without callers: %v\n%s", listen, err, out)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "jetstream")); err == nil {
			t.Fatalf("serve --listen %s opened the ledger before refusing", listen)
		}
	}
}

// Without callers, serve on loopback says at startup that every call is
// the local operator, and records that name.
func TestAuthNoCallersWarns(t *testing.T) {
	logs := &syncWriter{w: &bytes.Buffer{}}
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1", FingerprintKey: testKey,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	if !g.Auth.Local() {
		t.Fatal("no callers, yet not single-operator mode")
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "principal="+auth.LocalOperator) {
		t.Fatalf("startup log does not warn about single-operator mode:\n%s", l)
	}
	res, err := svc.NewBudgetServiceClient(http.DefaultClient, "http://"+g.Addr).SetLimit(context.Background(),
		connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 5, Currency: "GBP"}))
	if err != nil || res.Msg.GetAccount().GetDelegator() != auth.LocalOperator {
		t.Fatalf("SetLimit as the local operator: %v, %v", res, err)
	}
}

// syncWriter serializes writes of concurrent loggers.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// auth decides who calls; it touches no storage. config reads one file; it
// imports no Connect (and so not auth).
func TestAuthAndConfigImports(t *testing.T) {
	for pkg, forbidden := range map[string][]string{
		"auth":   {"github.com/nats-io/", "github.com/cockroachdb/pebble", "github.com/portcullis-dev/portcullis/ledger"},
		"config": {"connectrpc.com/", "github.com/portcullis-dev/portcullis/auth"},
	} {
		out, err := exec.Command("go", "list", "-deps", "github.com/portcullis-dev/portcullis/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// /metrics answers anyone with the gateway's counts, but the budget
// accounts' names and money only to the callers the Connect API shows them
// to (finance, budget_admin); a token that belongs to no caller is refused
// rather than answered with less.
func TestMetricsShowAccountsOnlyToTheirReaders(t *testing.T) {
	cfg, tokens := authConfig(t)
	addr, _, _ := serveWithCallers(t, cfg, tokens["analyst-1"])
	as := func(name string) string { return "Bearer " + tokens[name] }
	for _, call := range []struct{ procedure, caller, body string }{
		{svc.BudgetServiceSetLimitProcedure, "cfo", `{"account": "ops", "limit": 100000, "currency": "GBP"}`},
		{svc.BudgetServiceReserveProcedure, "deploy-runner", `{"account": "ops", "operationKey": "op-1", "requestDigest": "sha256:h", "amount": 250}`},
	} {
		if code, out := rpc(t, addr, call.procedure, as(call.caller), call.body); code != "ok" {
			t.Fatalf("%s: %s %v", call.procedure, code, out)
		}
	}
	scrape := func(authorization string) (int, string, http.Header) {
		t.Helper()
		status, body, h := request(t, http.MethodGet, "http://"+addr+"/metrics", authorization, "")
		return status, string(body), h
	}
	held := `portcullis_budget_held_minor{account="ops",currency="GBP"} 250`
	limit := `portcullis_budget_limit_minor{account="ops",currency="GBP"} 100000`
	for _, tc := range []struct {
		who, authorization string
		accounts           bool
	}{
		{"no token", "", false},
		{"executor", as("deploy-runner"), false},
		{"analyst", as("analyst-1"), false},
		{"approver", as("alice"), false},
		{"finance", as("finance-bot"), true},
		{"budget_admin", as("cfo"), true},
	} {
		status, body, _ := scrape(tc.authorization)
		if status != http.StatusOK {
			t.Fatalf("%s: /metrics %d: %s", tc.who, status, body)
		}
		if !strings.Contains(body, `portcullis_decisions_total{kind="budget",outcome="allowed"} 1`) {
			t.Errorf("%s: /metrics lacks the decision counters", tc.who)
		}
		shows := strings.Contains(body, `account="ops"`)
		if shows != tc.accounts {
			t.Errorf("%s: /metrics shows the budget account: %v, want %v", tc.who, shows, tc.accounts)
		}
		if tc.accounts && (!strings.Contains(body, held) || !strings.Contains(body, limit)) {
			t.Errorf("%s: /metrics lacks %s or %s", tc.who, held, limit)
		}
	}
	for _, bad := range []string{"Bearer " + strings.Repeat("ab", 32), "Basic Zm9vOmJhcg=="} {
		status, body, h := scrape(bad)
		if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: /metrics %d (challenge %q), want 401 with a challenge", bad, status, h.Get("WWW-Authenticate"))
		}
		if strings.Contains(body, "portcullis_") {
			t.Errorf("Authorization %q: a refused scrape carries metrics", bad)
		}
	}
}
