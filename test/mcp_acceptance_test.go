package test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/server"
)

// tsAgentMeta runs the TypeScript SDK client with an explicit _meta ("{}":
// no intent scope, no operation key).
func tsAgentMeta(t *testing.T, url, tool, args, meta string) map[string]any {
	t.Helper()
	out, err := exec.Command("node", "ts/agent.mjs", url, agentToken, tool, args, "0", meta).Output()
	if err != nil {
		t.Fatalf("node agent: %v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("agent printed %q", out)
	}
	return m
}

func ensureTSClient(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for the TypeScript client test (.ci/run installs it)")
	}
	if _, err := os.Stat("ts/node_modules/@modelcontextprotocol/sdk"); err != nil {
		out, err := exec.Command("npm", "install", "--prefix", "ts", "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			t.Fatalf("npm install: %v\n%s", err, out)
		}
	}
}

// serveGateway is one `portcullis serve` process.
type serveGateway struct {
	cmd       *exec.Cmd
	dir, addr string
}

// twoServe runs two `portcullis serve` processes on one ledger (the second
// joins the first's embedded NATS).
func twoServe(t *testing.T, cfg string) (serveGateway, serveGateway) {
	t.Helper()
	g1 := serveGateway{dir: t.TempDir(), addr: freeAddr(t)}
	g1.cmd = serveProcess(t, g1.dir, g1.addr, cfg)
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(g1.dir, "nats.url")))))
	g2 := serveGateway{dir: t.TempDir(), addr: freeAddr(t)}
	g2.cmd = serveProcess(t, g2.dir, g2.addr, cfg, "--nats-url", natsURL)
	return g1, g2
}

// agentSession opens a Go SDK client session (default: stateless
// 2026-07-28) against a gateway address.
func agentSession(t *testing.T, addr string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: agentTransport(agentToken)}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func callRecord(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any, meta sdk.Meta) map[string]any {
	t.Helper()
	r, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	return structured(t, r)
}

// Acceptance: the Go SDK client and the TypeScript SDK client against two
// `portcullis serve` gateways on one ledger and a counting target. Each
// retry path (a new session on the other gateway without an operation
// key, the same operation key on the other gateway, a task polled on the
// other gateway) gives exactly one effect and the documented answer; a new
// operation key gives a second effect.
func TestMCPAcceptanceTwoServeGateways(t *testing.T) {
	ensureTSClient(t)
	tg := newTarget(t)
	cfg := identityConfig(t, tg)
	sg1, sg2 := twoServe(t, cfg)
	addr1, addr2 := sg1.addr, sg2.addr
	want := func(step string, n int32) {
		t.Helper()
		if got := tg.performed.Load(); got != n {
			t.Fatalf("%s: target performed %d, want %d", step, got, n)
		}
	}

	// Go SDK: reconnect on the other gateway, no operation key.
	first := callRecord(t, agentSession(t, addr1), "deploy_release", map[string]any{"release_id": "acc-1"}, nil)
	retry := callRecord(t, agentSession(t, addr2), "deploy_release", map[string]any{"release_id": "acc-1"}, nil)
	if first["state"] != "completed" || retry["state"] != "completed" || retry["execution_id"] != first["execution_id"] {
		t.Fatalf("Go SDK reconnect: %v then %v", first, retry)
	}
	want("Go SDK reconnect", 1)

	// Go SDK: the same operation key on the other gateway; then a new key.
	key := sdk.Meta{"io.portcullis/operation-key": "acc-pay-1"}
	p1 := callRecord(t, agentSession(t, addr1), "create_payment", map[string]any{"amount": 9}, key)
	p2 := callRecord(t, agentSession(t, addr2), "create_payment", map[string]any{"amount": 9}, key)
	if p2["execution_id"] != p1["execution_id"] {
		t.Fatalf("same operation key: %v then %v", p1, p2)
	}
	want("same operation key", 2)
	p3 := callRecord(t, agentSession(t, addr2), "create_payment", map[string]any{"amount": 9}, sdk.Meta{"io.portcullis/operation-key": "acc-pay-2"})
	if p3["execution_id"] == p1["execution_id"] || p3["state"] != "completed" {
		t.Fatalf("new operation key: %v", p3)
	}
	want("new operation key", 3)

	// A task started on one gateway, polled on the other.
	tg.delay.Store(int64(400 * time.Millisecond))
	g1, g2 := &server.Gateway{Addr: addr1}, &server.Gateway{Addr: addr2}
	msg := modernCall(t, g1, agentToken, 1, "slow_job", map[string]any{"n": 1}, map[string]any{"io.portcullis/operation-key": "acc-job-1"}, true)
	handle, _ := msg["result"].(map[string]any)
	taskID, _ := handle["taskId"].(string)
	if handle["resultType"] != "task" || taskID == "" {
		t.Fatalf("want a task handle: %v", msg)
	}
	if done := pollTask(t, g2, taskID); done["status"] != "completed" {
		t.Fatalf("task on the other gateway: %v", done)
	}
	want("task", 4)
	tg.delay.Store(0)

	// TypeScript SDK: a new process (new session) on the other gateway, no
	// operation key; then a new key.
	url1, url2 := "http://"+addr1+"/mcp", "http://"+addr2+"/mcp"
	ts1 := tsAgentMeta(t, url1, "deploy_release", `{"release_id":"acc-ts"}`, `{}`)
	ts2 := tsAgentMeta(t, url2, "deploy_release", `{"release_id":"acc-ts"}`, `{}`)
	st1, _ := ts1["structured"].(map[string]any)
	st2, _ := ts2["structured"].(map[string]any)
	if st1["state"] != "completed" || st2["state"] != "completed" || st1["execution_id"] != st2["execution_id"] {
		t.Fatalf("TypeScript reconnect: %v then %v", ts1, ts2)
	}
	want("TypeScript reconnect", 5)
	ts3 := tsAgentMeta(t, url2, "deploy_release", `{"release_id":"acc-ts"}`, `{"io.portcullis/operation-key":"acc-ts-new"}`)
	if st3, _ := ts3["structured"].(map[string]any); st3["state"] != "completed" || st3["execution_id"] == st1["execution_id"] {
		t.Fatalf("TypeScript new operation key: %v", ts3)
	}
	want("TypeScript new operation key", 6)

	// Across a restart: both gateways SIGKILLed, the first restarted on its
	// data directory; tasks/get still answers from the ledger, and a retry
	// of the task's call sends nothing.
	for _, sg := range []serveGateway{sg2, sg1} {
		_ = sg.cmd.Process.Kill()
		_, _ = sg.cmd.Process.Wait()
	}
	serveProcess(t, sg1.dir, sg1.addr, cfg)
	if done := pollTask(t, g1, taskID); done["status"] != "completed" {
		t.Fatalf("task after a restart: %v", done)
	}
	again := modernCall(t, g1, agentToken, 2, "slow_job", map[string]any{"n": 1}, map[string]any{"io.portcullis/operation-key": "acc-job-1"}, true)
	if rr := resultRecord(t, again); rr["execution_id"] != taskID {
		t.Fatalf("retry of the task's call after a restart: %v", again)
	}
	want("after a restart", 6)
}
