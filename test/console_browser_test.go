package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// countingTarget is a real HTTP API on 127.0.0.1 that counts what reaches
// it by path. /wire never answers before the caller gives up, so its
// outcome is unknown.
type countingTarget struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newCountingTarget(t *testing.T) *countingTarget {
	ct := &countingTarget{hits: map[string]int{}}
	stop := make(chan struct{})
	ct.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the caller hanging up
		ct.mu.Lock()
		ct.hits[r.URL.Path]++
		n := ct.hits[r.URL.Path]
		ct.mu.Unlock()
		if r.URL.Path == "/wire" {
			select { // the gateway's dispatch timeout ends it
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payout":"p-%d","key":%q}`, n, r.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(ct.Close)
	t.Cleanup(func() { close(stop) }) // runs first
	return ct
}

func (ct *countingTarget) count(path string) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.hits[path]
}

func consoleConfig(t *testing.T, ct *countingTarget) string {
	cfg := fmt.Sprintf(`
gateway:
  id: gw-a
agents:
  agent-7: {token_sha256: %s}
tools:
  send_payout:
    description: Pay a supplier
    channel: http
    method: POST
    target: %[2]s/payouts
    timeout: 5s
    retry: idempotency_key
    match_window: 1h
    approval: per_use
    fingerprint:
      secrets: [bank_token]
  wire_funds:
    channel: http
    method: POST
    target: %[2]s/wire
    timeout: 300ms
    retry: irreversible
    match_window: until_resolved
`, sha256hex(agentToken), ct.URL) + consoleCallersYAML()
	p := filepath.Join(t.TempDir(), "console.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// agentCall makes one tools/call as agent-7 in a new MCP session (an
// agent after a restart) and returns its structured record.
func agentCall(t *testing.T, addr, tool string, args map[string]any, opKey string) map[string]any {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "console-test-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: agentTransport(agentToken)}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	meta := mcp.Meta{"io.portcullis/intent-scope": "run:console"}
	if opKey != "" {
		meta["io.portcullis/operation-key"] = opKey
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structured content: %+v", res)
	}
	return m
}

// chromiumPath finds Debian's chromium.
func chromiumPath() string {
	for _, p := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	return ""
}

// End to end in headless Chromium against two `portcullis serve`
// processes sharing one ledger: an agent's per_use call waits for
// approval; an approver signs in on the *other* gateway, sees the full
// record, approves; the agent's retry dispatches exactly once at the
// counting target. An irreversible call with an unknown outcome shows
// needs review with the five answers and is resolved with evidence. A new
// pending approval appears without a reload. Finance sees over-limit and
// override decisions marked. Screenshots are written and checked.
func TestConsoleBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("chromium is not installed: apt-get update && apt-get install -y chromium")
	}
	ctx := context.Background()
	ct := newCountingTarget(t)
	cfg := consoleConfig(t, ct)
	dirA, addrA, addrB := t.TempDir(), freeAddr(t), freeAddr(t)
	serveProcessAs(t, "analyst-token", dirA, addrA, cfg, "--nats-listen", "127.0.0.1:-1", "--fingerprint-key", testKey)
	natsURL, err := os.ReadFile(filepath.Join(dirA, "nats.url"))
	if err != nil {
		t.Fatal(err)
	}
	serveProcessAs(t, "analyst-token", t.TempDir(), addrB, cfg, "--nats-url", strings.TrimSpace(string(natsURL)),
		"--gateway-id", "gw-b", "--fingerprint-key", testKey)

	// The agent's calls go to gateway A.
	payout := map[string]any{"supplier": "acme-ltd", "amount": 1250, "bank_token": "tok_live_SECRET"}
	first := agentCall(t, addrA, "send_payout", payout, "payout-2026-12-01")
	if first["state"] != "awaiting_approval" {
		t.Fatalf("per_use call: %v", first)
	}
	pending := first["execution_id"].(string)
	wire := agentCall(t, addrA, "wire_funds", map[string]any{"to": "DE89 3704", "amount": 990000}, "wire-77")
	if wire["state"] != "outcome_unknown" {
		t.Fatalf("wire call: %v", wire)
	}
	unknown := wire["execution_id"].(string)
	if ct.count("/payouts") != 0 {
		t.Fatal("a pending approval reached the target")
	}

	// Budget decisions: one within the limit, one over it allowed by an
	// override (cfo, budget_admin), one over it denied; the plain
	// reservations are the executor payments'.
	cfo := portcullisv1connect.NewBudgetServiceClient(tokenClient("cfo-token"), "http://"+addrA)
	payments := portcullisv1connect.NewBudgetServiceClient(tokenClient("payments-token"), "http://"+addrA)
	if _, err := cfo.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50000, Currency: "GBP", Delegator: "cfo"})); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*pb.ReserveRequest{
		{Account: "acme", OperationKey: "op-A", RequestDigest: "sha256:a", Amount: 30000, Currency: "GBP"},
		{Account: "acme", OperationKey: "op-B", RequestDigest: "sha256:b", Amount: 25000, Currency: "GBP", Override: &pb.Override{By: "cfo", Reason: "year-end supplier run"}},
		{Account: "acme", OperationKey: "op-C", RequestDigest: "sha256:c", Amount: 40000, Currency: "GBP"},
	} {
		bc := payments
		if r.GetOverride() != nil {
			bc = cfo
		}
		if _, err := bc.Reserve(ctx, connect.NewRequest(r)); err != nil {
			t.Fatal(err)
		}
	}

	shots := t.TempDir()
	kept, err := os.MkdirTemp("", "portcullis-console-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots kept in %s", kept)
	actx, cancelA := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelT()
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		for _, dir := range []string{shots, kept} {
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text %s: %v", sel, err)
		}
		return s
	}
	// submit clicks a form's button and returns the flash message of the
	// page it leads to (the old page's flash is removed first).
	submit := func(button string) string {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(document.getElementById("flash")?.remove(), true)`)); err != nil {
			t.Fatal(err)
		}
		run("submit "+button, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS(`#flash`)))
		return text(`#flash`)
	}
	consoleB := "http://" + addrB + "/console/"

	// Sign in as the approver on gateway B.
	run("sign in page", chromedp.Navigate(consoleB), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	shot("01-sign-in.png")
	run("sign in", chromedp.SendKeys(chromedp.CSS(`#token`), "alice-token"), chromedp.Click(chromedp.CSS(`#sign-in`)),
		chromedp.WaitVisible(chromedp.CSS(`#item-`+pending)))
	if got := text(`#caller`); got != "alice" {
		t.Fatalf("header caller %q", got)
	}
	if got := text(`#gateway-id`); got != "gw-b" {
		t.Fatalf("header gateway %q", got)
	}
	item := `#item-` + pending + ` `
	if got := text(item + `.tool`); got != "send_payout" {
		t.Fatalf("tool %q", got)
	}
	if got := text(item + `.actor`); got != "agent-7" {
		t.Fatalf("actor %q", got)
	}
	args := text(item + `.arguments`)
	if !strings.Contains(args, "acme-ltd") || strings.Contains(args, "tok_live_SECRET") || !strings.Contains(args, "hmac-sha256:") {
		t.Fatalf("arguments must show the record with the secret digested: %s", args)
	}
	if got := text(item + `.first-dispatch`); got != "never dispatched" {
		t.Fatalf("first dispatch %q", got)
	}
	if got := text(item + `.not-resent`); !strings.Contains(got, "approval") {
		t.Fatalf("reason nothing was resent %q", got)
	}
	if count(`main h1`) != 1 || count(`nav[aria-label] a[aria-current="page"]`) != 1 || count(`[aria-live="polite"]`) != 1 || count(`label[for="reason-`+pending+`"]`) != 1 {
		t.Fatal("landmarks, current page, live region or labels missing")
	}
	shot("02-approvals.png")

	// Live: a new pending approval appears without a reload.
	second := agentCall(t, addrA, "send_payout", map[string]any{"supplier": "globex", "amount": 99}, "payout-globex")
	secondID := second["execution_id"].(string)
	run("live update", chromedp.WaitVisible(chromedp.CSS(`#item-`+secondID)))

	// Approve the first, deny the second with a reason.
	// By keyboard: the first Tab reaches the skip link, further Tabs reach
	// the Approve button (in reading order), Enter approves.
	active := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.id || document.activeElement.textContent.trim()`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run("keyboard start", chromedp.Navigate(consoleB+"approvals"), chromedp.WaitVisible(chromedp.CSS(`#item-`+secondID)), chromedp.KeyEvent("\t"))
	if got := active(); got != "Skip to content" {
		t.Fatalf("first Tab focused %q, want the skip link", got)
	}
	var order []string
	for i := 0; i < 40 && active() != "approve-"+pending; i++ {
		order = append(order, active())
		run("tab", chromedp.KeyEvent("\t"))
	}
	if active() != "approve-"+pending {
		t.Fatalf("Approve is not reachable by Tab; focus went %v", order)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(document.getElementById("flash")?.remove(), true)`)); err != nil {
		t.Fatal(err)
	}
	run("approve by keyboard", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`#flash`)))
	if got := text(`#flash`); !strings.Contains(got, "Approved "+pending+" as alice") {
		t.Fatalf("flash %q", got)
	}
	run("deny reason", chromedp.SendKeys(chromedp.CSS(`#reason-`+secondID), "duplicate supplier"))
	if got := submit(`#deny-` + secondID); !strings.Contains(got, "Denied "+secondID) {
		t.Fatalf("flash %q", got)
	}

	// The agent retries on gateway A: exactly one dispatch reaches the
	// target, and the denied call's retry sends nothing.
	done := agentCall(t, addrA, "send_payout", payout, "payout-2026-12-01")
	if done["execution_id"] != pending || ct.count("/payouts") != 1 {
		t.Fatalf("after approval: %v, target saw %d", done, ct.count("/payouts"))
	}
	denied := agentCall(t, addrA, "send_payout", map[string]any{"supplier": "globex", "amount": 99}, "payout-globex")
	if denied["state"] != "denied" || ct.count("/payouts") != 1 {
		t.Fatalf("denied retry: %v", denied)
	}

	// The approved execution's timeline spans both gateways.
	run("execution page", chromedp.Navigate(consoleB+"executions/"+pending), chromedp.WaitVisible(chromedp.CSS(`.timeline`)))
	if got := text(`.timeline caption`); !strings.Contains(got, "2 gateways") || !strings.Contains(got, "gw-a") || !strings.Contains(got, "gw-b") {
		t.Fatalf("timeline caption %q", got)
	}
	if count(`.answers > li`) != 5 {
		t.Fatalf("want the investigation's five answers, got %d", count(`.answers > li`))
	}
	shot("03-execution.png")

	// Needs attention: the unknown irreversible call, with its answers; resolve it.
	run("attention", chromedp.Navigate(consoleB+"attention"), chromedp.WaitVisible(chromedp.CSS(`#item-`+unknown)))
	item = `#item-` + unknown + ` `
	if got := text(item + `.item-head`); !strings.Contains(got, "NEEDS REVIEW") || !strings.Contains(got, "OUTCOME UNKNOWN") {
		t.Fatalf("badges %q", got)
	}
	if n := count(item + `.answers > li`); n != 5 {
		t.Fatalf("five answers, got %d", n)
	}
	if got := text(item + `.answers > li:nth-child(3) .a`); !strings.Contains(got, "unknown") {
		t.Fatalf("answer 3 %q", got)
	}
	shot("04-attention.png")
	// "Not executed" is a claim of absence: the ledger takes it only once
	// the dispatch deadline has passed (the target may still be working).
	waitPastDeadline(t, "http://"+addrA, unknown)
	run("resolve form", chromedp.Click(chromedp.CSS(`#res-not-executed-`+unknown)),
		chromedp.SendKeys(chromedp.CSS(`#evidence-`+unknown), "bank statement 2026-12-01 shows no wire to DE89 3704"))
	if got := submit(`#resolve-` + unknown); !strings.Contains(got, "Resolved "+unknown+" as not executed") {
		t.Fatalf("flash %q", got)
	}
	ec := portcullisv1connect.NewExecutionServiceClient(tokenClient("analyst-token"), "http://"+addrA)
	x, err := ec.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: unknown}))
	if err != nil {
		t.Fatal(err)
	}
	if x.Msg.GetExecution().GetState() != pb.State_STATE_NOT_EXECUTED || !strings.Contains(x.Msg.GetExecution().GetReason(), "by alice") {
		t.Fatalf("after resolve: %v %q", x.Msg.GetExecution().GetState(), x.Msg.GetExecution().GetReason())
	}
	if ct.count("/wire") != 1 {
		t.Fatalf("the wire target saw %d requests", ct.count("/wire"))
	}

	// Find by operation key opens the execution.
	run("find", chromedp.SendKeys(chromedp.CSS(`#q-nav`), "wire-77\n"), chromedp.WaitVisible(chromedp.CSS(`#item-`+unknown)))

	// Finance: no approvals (a clear 403), budgets with the over-limit marks.
	run("sign out", chromedp.Click(chromedp.CSS(`#sign-out`)), chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "fin-token"), chromedp.Click(chromedp.CSS(`#sign-in`)),
		chromedp.WaitVisible(chromedp.CSS(`#account-acme`)))
	acct := `#account-acme `
	if n := count(acct + `.decision-over-limit`); n != 2 {
		t.Fatalf("want 2 over-limit decisions marked, got %d", n)
	}
	if got := text(acct + `.decision-override`); !strings.Contains(got, "OVERRIDE by cfo") {
		t.Fatalf("override mark %q", got)
	}
	if count(acct+`.bar .seg-spent`) != 1 || count(acct+`.bar .seg-held`) != 1 || !strings.Contains(text(acct+`.held`), "550.00 GBP") {
		t.Fatalf("bars or held amount missing: held %q", text(acct+`.held`))
	}
	if n := count(acct + `table.holds tbody tr`); n != 2 {
		t.Fatalf("want 2 open holds, got %d", n)
	}
	shot("05-budgets.png")
	run("403", chromedp.Navigate(consoleB+"approvals"), chromedp.WaitVisible(chromedp.CSS(`#problem-text`)))
	if got := text(`#problem-text`); !strings.Contains(got, "needs the role approver") {
		t.Fatalf("403 page %q", got)
	}
	shot("06-forbidden.png")
	for _, n := range []string{"01-sign-in.png", "02-approvals.png", "03-execution.png", "04-attention.png", "05-budgets.png", "06-forbidden.png"} {
		if st, err := os.Stat(filepath.Join(shots, n)); err != nil || st.Size() < 10_000 {
			t.Fatalf("screenshot %s: %v", n, err)
		}
	}
}

// waitPastDeadline waits (bounded) until the execution's recorded dispatch
// deadline has passed.
func waitPastDeadline(t *testing.T, base, id string) {
	t.Helper()
	ec := portcullisv1connect.NewExecutionServiceClient(tokenClient("analyst-token"), base)
	res, err := ec.GetExecution(context.Background(), connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := res.Msg.GetExecution().GetDispatchDeadline().AsTime()
	if wait := time.Until(deadline); wait > time.Minute {
		t.Fatalf("dispatch deadline %s is too far away for this test", deadline)
	} else if wait > 0 {
		time.Sleep(wait + 50*time.Millisecond)
	}
}
