package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/auth"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/server"
)

// Callers of the console tests (the config's callers:): token → name,
// roles and the rest of the entry. runner is the executor the tests' own
// Connect calls use; cfo and payments set up the browser test's budget.
var consoleCallers = map[string]struct {
	name  string
	roles []auth.Role
	extra string
}{
	"alice-token":    {"alice", []auth.Role{auth.Approver, auth.Analyst}, ""},
	"fin-token":      {"fin", []auth.Role{auth.Finance}, ""},
	"analyst-token":  {"ana", []auth.Role{auth.Analyst}, ""},
	"runner-token":   {"runner", []auth.Role{auth.Executor}, ", acts_for: [agent-7]"},
	"cfo-token":      {"cfo", []auth.Role{auth.BudgetAdmin}, ""},
	"payments-token": {"payments", []auth.Role{auth.Executor}, ", acts_for: [agent-7], accounts: [acme]"},
}

// consoleCallersYAML is the callers: section: each caller's token as its
// SHA-256 in hex (printf %s "$TOKEN" | sha256sum) and its roles.
func consoleCallersYAML() string {
	var b strings.Builder
	b.WriteString("callers:\n")
	for tok, c := range consoleCallers {
		roles := make([]string, len(c.roles))
		for i, r := range c.roles {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, "  %s: {token_sha256: %s, roles: [%s]%s}\n", c.name, sha256hex(tok), strings.Join(roles, ", "), c.extra)
	}
	return b.String()
}

// writeConsoleConfig writes the test config with the console's callers.
func writeConsoleConfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(p, []byte(testConfig+consoleCallersYAML()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenClient is an HTTP client that sends token as its bearer.
func tokenClient(token string) *http.Client { return &http.Client{Transport: bearer{token: token}} }

// runnerClient is the ExecutionService as the executor runner.
func runnerClient(addr string) portcullisv1connect.ExecutionServiceClient {
	return portcullisv1connect.NewExecutionServiceClient(tokenClient("runner-token"), "http://"+addr)
}

// consoleClient is a browser stand-in: a cookie jar that does not follow
// redirects, so each answer can be checked.
type consoleClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newConsoleClient(t *testing.T, addr string) *consoleClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleClient{t: t, base: "http://" + addr, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page GETs path until its body contains want (the console reads the
// views, which may lag an append just made), at most 5 s; it returns the
// last body.
func (c *consoleClient) page(path, want string) string {
	c.t.Helper()
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = c.do("GET", path, nil)
		if strings.Contains(body, want) || time.Now().After(deadline) {
			return body
		}
	}
}

func (c *consoleClient) do(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no csrf field in:\n%s", html)
	}
	return m[1]
}

// signIn signs in with token and returns the session's CSRF token.
func (c *consoleClient) signIn(token string) string {
	c.t.Helper()
	_, page := c.do("GET", "/console/login", nil)
	res, body := c.do("POST", "/console/login", url.Values{"csrf": {csrfOf(c.t, page)}, "token": {token}, "next": {"/console/"}})
	if res.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign-in: %d\n%s", res.StatusCode, body)
	}
	_, home := c.do("GET", "/console/find", nil)
	return csrfOf(c.t, home)
}

// startConsoleGateway runs a gateway with the console's callers. With a
// clock, its own deadline sweep is off, so the test decides when an
// overdue dispatch is marked OUTCOME_UNKNOWN (through the console).
func startConsoleGateway(t *testing.T, clk *clock) *server.Gateway {
	t.Helper()
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConsoleConfig(t), NatsListen: "127.0.0.1:-1",
		FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if clk != nil {
		o.Now, o.NoSweep = clk.Now, true
	}
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	return g
}

// The console's trust rules over plain HTTP: the session cookie's flags,
// sign-in needs the form's token and a known caller, every action needs the
// session's CSRF token and the role, cross-site posts are refused, and a
// caller without the role gets a clear 403 page. Nothing refused changes
// the ledger.
func TestConsoleSessionsCSRFAndRoles(t *testing.T) {
	g := startConsoleGateway(t, nil)
	ctx := context.Background()
	ec := runnerClient(g.Addr)
	res, err := ec.Begin(ctx, beginReq("rotate_credentials", args(t, map[string]any{"user": "svc-1"}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetExecution().GetExecutionId()
	if st := res.Msg.GetExecution().GetState(); st != pb.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("state %v", st)
	}
	state := func() pb.State {
		x, err := ec.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return x.Msg.GetExecution().GetState()
	}

	anon := newConsoleClient(t, g.Addr)
	if r, _ := anon.do("GET", "/console/approvals", nil); r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/console/login") {
		t.Fatalf("anonymous page: %d %s", r.StatusCode, r.Header.Get("Location"))
	}
	if r, _ := anon.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {"x"}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous approve: %d", r.StatusCode)
	}
	// Sign-in without the login form's token, and with an unknown token.
	if r, _ := anon.do("POST", "/console/login", url.Values{"token": {"alice-token"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without form token: %d", r.StatusCode)
	}
	_, page := anon.do("GET", "/console/login", nil)
	if r, body := anon.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {"wrong"}}); r.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "known caller") {
		t.Fatalf("unknown token: %d", r.StatusCode)
	}
	// A caller with no console role (the executor) is refused at the
	// sign-in, saying which roles the console needs, and gets no session.
	_, page = anon.do("GET", "/console/login", nil)
	if r, body := anon.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {"runner-token"}}); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "needs the role approver or analyst") || len(r.Cookies()) > 1 {
		t.Fatalf("executor sign-in: %d %v\n%s", r.StatusCode, r.Cookies(), body)
	}

	alice := newConsoleClient(t, g.Addr)
	_, page = alice.do("GET", "/console/login", nil)
	r, _ := alice.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {"alice-token"}, "next": {"//evil.example/"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/console/" {
		t.Fatalf("sign-in: %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	var sc *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == "portcullis_console" {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure || len(sc.Value) < 20 {
		t.Fatalf("session cookie %+v", sc)
	}
	body := alice.page("/console/approvals", id)
	csrf := csrfOf(t, body)
	if !strings.Contains(body, id) || !strings.Contains(body, "rotate_credentials") || !strings.Contains(body, `id="caller">alice<`) || !strings.Contains(body, "gw-test") {
		t.Fatalf("approvals page lacks the pending execution, caller or gateway:\n%s", body)
	}
	if r, _ := alice.do("POST", "/console/approvals/"+id+"/approve", url.Values{}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("approve without csrf: %d", r.StatusCode)
	}
	if r, _ := alice.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {csrf + "x"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("approve with a wrong csrf: %d", r.StatusCode)
	}
	if r, _ := alice.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {csrf}}, "Origin", "http://evil.example"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site approve: %d", r.StatusCode)
	}
	if st := state(); st != pb.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("a refused action changed the ledger: %v", st)
	}

	// An analyst sees approvals but may not approve; finance may not see them.
	ana := newConsoleClient(t, g.Addr)
	anaCSRF := ana.signIn("analyst-token")
	if r, body := ana.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {anaCSRF}}); r.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs the role approver") {
		t.Fatalf("analyst approve: %d\n%s", r.StatusCode, body)
	}
	fin := newConsoleClient(t, g.Addr)
	fin.signIn("fin-token")
	if r, body := fin.do("GET", "/console/approvals", nil); r.StatusCode != http.StatusForbidden || !strings.Contains(body, "signed in as fin") {
		t.Fatalf("finance on approvals: %d\n%s", r.StatusCode, body)
	}
	if r, _ := fin.do("GET", "/console/budgets", nil); r.StatusCode != http.StatusOK {
		t.Fatalf("finance on budgets: %d", r.StatusCode)
	}
	if st := state(); st != pb.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("a refused action changed the ledger: %v", st)
	}

	// The approver approves; it is recorded as the signed-in caller.
	if r, _ := alice.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {csrf}}, "Origin", "http://"+g.Addr); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", r.StatusCode)
	}
	x, err := ec.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if x.Msg.GetExecution().GetState() != pb.State_STATE_AUTHORIZED || x.Msg.GetExecution().GetAuthorizedBy() != "alice" {
		t.Fatalf("after approve: %v by %q", x.Msg.GetExecution().GetState(), x.Msg.GetExecution().GetAuthorizedBy())
	}
	_, body = alice.do("GET", "/console/approvals", nil)
	if !strings.Contains(body, "Approved "+id+" as alice") {
		t.Fatalf("no confirmation after approve:\n%s", body)
	}

	// Signing out ends the session on the server, not only in the browser.
	old := alice.hc.Jar.Cookies(&url.URL{Scheme: "http", Host: g.Addr, Path: "/console/"})
	if r, _ := alice.do("POST", "/console/logout", url.Values{"csrf": {csrf}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.StatusCode)
	}
	replay := newConsoleClient(t, g.Addr)
	replay.hc.Jar.SetCookies(&url.URL{Scheme: "http", Host: g.Addr, Path: "/console/"}, old)
	if r, _ := replay.do("GET", "/console/approvals", nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("old session cookie still works after sign-out: %d", r.StatusCode)
	}
}

// The console is served without a CDN: its assets come from the binary.
func TestConsoleAssetsEmbedded(t *testing.T) {
	g := startConsoleGateway(t, nil)
	for _, p := range []string{"/console/assets/console.css", "/console/assets/console.js"} {
		res, err := http.Get("http://" + g.Addr + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(b) < 500 {
			t.Fatalf("%s: %d, %d bytes", p, res.StatusCode, len(b))
		}
	}
	res, err := http.Get("http://" + g.Addr + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(string(b), "https://") {
		t.Fatalf("CSP %q or an external reference in the page", csp)
	}
}

// An overdue dispatch (DISPATCHED past the dispatch_deadline its event
// recorded, no result) shows under needs attention and only then can be
// marked OUTCOME_UNKNOWN; it is then resolved with evidence and a target
// status. Find opens executions by id and fingerprint and says when
// nothing matches.
func TestConsoleOverdueDispatchAndFind(t *testing.T) {
	clk := &clock{}
	g := startConsoleGateway(t, clk)
	ctx := context.Background()
	ec := runnerClient(g.Addr)
	res, err := ec.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": 42}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	x := res.Msg.GetExecution()
	id := x.GetExecutionId()
	if _, err := ec.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})); err != nil {
		t.Fatal(err)
	}
	get := func() *pb.Execution {
		r, err := ec.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.GetExecution()
	}
	alice := newConsoleClient(t, g.Addr)
	csrf := alice.signIn("alice-token")
	if _, body := alice.do("GET", "/console/attention", nil); strings.Contains(body, id) {
		t.Fatal("an in-flight dispatch within its deadline is listed as needing attention")
	}
	alice.do("POST", "/console/executions/"+id+"/unknown", url.Values{"csrf": {csrf}})
	if _, body := alice.do("GET", "/console/executions/"+id, nil); !strings.Contains(body, "not a dispatch past its deadline") || get().GetState() != pb.State_STATE_DISPATCHED {
		t.Fatalf("marked unknown before its deadline: %v", get().GetState())
	}

	if d := get().GetDispatchDeadline(); d == nil {
		t.Fatal("the DISPATCHED execution carries no dispatch_deadline")
	} else {
		clk.Advance(time.Until(d.AsTime()) + time.Second) // past the recorded deadline (create_payment: 10m + grace)
	}
	_, body := alice.do("GET", "/console/attention", nil)
	if !strings.Contains(body, `id="item-`+id+`"`) || !strings.Contains(body, "OVERDUE DISPATCH") || !strings.Contains(body, "1 overdue dispatch") {
		t.Fatalf("overdue dispatch not listed:\n%s", body)
	}
	if r, _ := alice.do("POST", "/console/executions/"+id+"/unknown", url.Values{"csrf": {csrf}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("mark unknown: %d", r.StatusCode)
	}
	if got := get(); got.GetState() != pb.State_STATE_OUTCOME_UNKNOWN || !strings.Contains(got.GetReason(), "alice") {
		t.Fatalf("after mark unknown: %v %q", got.GetState(), got.GetReason())
	}
	// Resolving needs evidence; with it, the target status is recorded.
	alice.do("POST", "/console/executions/"+id+"/resolve", url.Values{"csrf": {csrf}, "resolution": {"completed"}})
	if get().GetState() != pb.State_STATE_OUTCOME_UNKNOWN {
		t.Fatal("resolved without evidence")
	}
	alice.do("POST", "/console/executions/"+id+"/resolve", url.Values{"csrf": {csrf}, "resolution": {"completed"}, "evidence": {"payments API shows order 42 paid"}, "target_status": {"201"}})
	if got := get(); got.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED || got.GetTargetStatus() != 201 {
		t.Fatalf("after resolve: %v status %d", got.GetState(), got.GetTargetStatus())
	}

	for _, q := range []string{id, x.GetFingerprint()} {
		r, _ := alice.do("GET", "/console/find?q="+url.QueryEscape(q), nil)
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/console/executions/"+id {
			t.Fatalf("find %s: %d %s", q, r.StatusCode, r.Header.Get("Location"))
		}
	}
	if r, body := alice.do("GET", "/console/find?q=no-such-key", nil); r.StatusCode != http.StatusNotFound || !strings.Contains(body, "No execution found with operation key no-such-key") {
		t.Fatalf("find nothing: %d", r.StatusCode)
	}
}

// The console reads through the gateway's services: it imports neither
// NATS nor Pebble, so it cannot bypass the ledger's rules.
func TestConsoleImportsNoStorage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/portcullis-dev/portcullis/console").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/nats-io/") || strings.HasPrefix(dep, "github.com/cockroachdb/pebble") {
			t.Errorf("console depends on %s", dep)
		}
	}
}

// Without callers in the config the sign-in page says the gateway runs in
// single-operator mode and signs in local-operator without a token (the
// gateway listens on loopback only); decisions are recorded as
// local-operator.
func TestConsoleSingleOperator(t *testing.T) {
	g := startGateway(t, "", nil) // testConfig: no callers
	ctx := context.Background()
	ec := client(g)
	res, err := ec.Begin(ctx, beginReq("rotate_credentials", args(t, map[string]any{"user": "svc-2"}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetExecution().GetExecutionId()

	op := newConsoleClient(t, g.Addr)
	_, page := op.do("GET", "/console/login", nil)
	if !strings.Contains(page, "This gateway runs without callers") || !strings.Contains(page, "Sign in as local-operator") || strings.Contains(page, `id="token"`) {
		t.Fatalf("sign-in page does not say single-operator mode:\n%s", page)
	}
	if r, _ := op.do("POST", "/console/login", url.Values{"next": {"/console/"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without the form token: %d", r.StatusCode)
	}
	csrf := op.signIn("")
	body := op.page("/console/approvals", id)
	if !strings.Contains(body, `id="caller">local-operator<`) || !strings.Contains(body, id) {
		t.Fatalf("approvals as local-operator:\n%s", body)
	}
	if r, _ := op.do("GET", "/console/budgets", nil); r.StatusCode != http.StatusOK {
		t.Fatalf("local-operator on budgets: %d", r.StatusCode)
	}
	if r, _ := op.do("POST", "/console/approvals/"+id+"/approve", url.Values{"csrf": {csrf}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", r.StatusCode)
	}
	x, err := ec.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Msg.GetExecution(); got.GetState() != pb.State_STATE_AUTHORIZED || got.GetAuthorizedBy() != "local-operator" {
		t.Fatalf("after approve: %v by %q", got.GetState(), got.GetAuthorizedBy())
	}
}

// An account's page shows what moved each hold (the target's status, the
// execution, the note) and marks a denial as not allowed.
func TestConsoleAccountShowsEvidence(t *testing.T) {
	g := startConsoleGateway(t, nil)
	ctx := context.Background()
	admin := portcullisv1connect.NewBudgetServiceClient(tokenClient("cfo-token"), "http://"+g.Addr)
	pay := portcullisv1connect.NewBudgetServiceClient(tokenClient("payments-token"), "http://"+g.Addr)
	mustOK(t)(admin.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 10_000, Currency: "GBP"})))
	mustOK(t)(pay.Reserve(ctx, connect.NewRequest(&pb.ReserveRequest{Account: "acme", OperationKey: "op-1", RequestDigest: "sha256:1", Amount: 4_000})))
	mustOK(t)(pay.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "acme", OperationKey: "op-1", Amount: 4_000,
		Evidence: &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 201, Note: "ledger line 77"}})))
	mustOK(t)(pay.Reserve(ctx, connect.NewRequest(&pb.ReserveRequest{Account: "acme", OperationKey: "op-2", RequestDigest: "sha256:2", Amount: 20_000})))

	fin := newConsoleClient(t, g.Addr)
	fin.signIn("fin-token")
	r, body := fin.do("GET", "/console/budgets/acme", nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("account page: %d", r.StatusCode)
	}
	for _, want := range []string{"target answered <strong>201</strong>", "act_01J4K8J7DX7V0000000000000Z", "ledger line 77", "(not allowed)", "within_limit=false"} {
		if !strings.Contains(body, want) {
			t.Errorf("account page lacks %q", want)
		}
	}
}
