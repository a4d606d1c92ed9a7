package test

import (
	"context"
	"path/filepath"

	"encoding/json"
	"fmt"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/mcp"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// tsAgent runs the TypeScript SDK client (test/ts, installed with npm).
func tsAgent(t *testing.T, url, tool, args string, timeoutMs int) map[string]any {
	t.Helper()
	cmdArgs := []string{"ts/agent.mjs", url, agentToken, tool, args}
	if timeoutMs > 0 {
		cmdArgs = append(cmdArgs, fmt.Sprint(timeoutMs))
	}
	out, err := exec.Command("node", cmdArgs...).Output()
	if err != nil {
		t.Fatalf("node agent: %v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("agent printed %q", out)
	}
	return m
}

// The conversation of TestMCPConnectionCutThenRetryAttaches, through the
// TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2 from npm) against
// `portcullis serve`: the first call gives up while the target works, the
// retry attaches and gets the stored result, the target performs once.
func TestTypeScriptClientAgainstServe(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for the TypeScript client test (.ci/run installs it)")
	}
	if _, err := os.Stat("ts/node_modules/@modelcontextprotocol/sdk"); err != nil {
		out, err := exec.Command("npm", "install", "--prefix", "ts", "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			t.Fatalf("npm install: %v\n%s", err, out)
		}
	}
	tg := newTarget(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	serveProcess(t, dataDir, addr, mcpConfig(t, tg))
	url := "http://" + addr + "/mcp"

	tg.delay.Store(int64(400 * time.Millisecond))
	first := tsAgent(t, url, "deploy_release", `{"release_id":"ts-1"}`, 100)
	if _, ok := first["error"]; !ok {
		t.Fatalf("the first call should have timed out: %v", first)
	}
	retry := tsAgent(t, url, "deploy_release", `{"release_id":"ts-1"}`, 0)
	st, _ := retry["structured"].(map[string]any)
	if st == nil || st["state"] != "completed" || tg.performed.Load() != 1 || tg.seen.Load() != 1 {
		t.Fatalf("retry: %v; target performed %d of %d requests", retry, tg.performed.Load(), tg.seen.Load())
	}
	if tools := fmt.Sprint(retry["tools"]); !strings.Contains(tools, "deploy_release") || strings.Contains(tools, "contract_only") {
		t.Fatalf("tools/list: %s", tools)
	}
	// The sessions journal tells which agent process each session was.
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	nc := natsConnectDir(t, natsURL, dataDir, natsauth.Analyst)
	js, _ := jetstream.New(nc)
	ses, err := js.Stream(context.Background(), mcp.SessionsStream)
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, ev := range subjectEvents(t, ses, "pc.session.*") {
		if sc := ev.GetSessionChanged(); ev.GetType() == pb.EventType_EVENT_TYPE_SESSION_STARTED && sc.GetClientName() == "ts-agent" && sc.GetActor() == "agent-7" && sc.GetProtocolVersion() != "" {
			started++
		}
	}
	if started < 2 {
		t.Fatalf("sessions journal: %d sessions of ts-agent started, want 2", started)
	}
	if out, err := exec.Command(binary, "audit", "verify", "--nats-url", natsURL, "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("audit verify with sessions: %v\n%s", err, out)
	}
	// A wrong token is refused.
	out, _ := exec.Command("node", "ts/agent.mjs", url, "wrong", "deploy_release", `{"release_id":"x"}`).Output()
	if !strings.Contains(string(out), `"error"`) || tg.seen.Load() != 1 {
		t.Fatalf("wrong token: %s", out)
	}
}
