package test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/server"
)

// startDemo runs the demo target (examples/target) and a gateway on the
// example config (examples/portcullis.yaml) pointed at it, the config
// first passed through patch; it returns the gateway and the target's
// address.
func startDemo(t *testing.T, patch func(cfg string) string) (*server.Gateway, string) {
	t.Helper()
	g, addr, _ := startDemoDir(t, patch)
	return g, addr
}

// startDemoDir is startDemo that also returns the gateway's data dir.
func startDemoDir(t *testing.T, patch func(cfg string) string) (*server.Gateway, string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "target")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/target").CombinedOutput(); err != nil {
		t.Fatalf("build examples/target: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	target := exec.Command(bin, "--listen", addr)
	target.Stdout, target.Stderr = io.Discard, io.Discard
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Process.Kill(); _ = target.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/releases?release_id=x")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo target never answered: %v", err)
		}
	}
	cfg, err := os.ReadFile("../examples/portcullis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "127.0.0.1:9090") {
		t.Fatal("the example config no longer points at the demo target")
	}
	s := strings.ReplaceAll(string(cfg), "127.0.0.1:9090", addr)
	if patch != nil {
		s = patch(s)
	}
	path := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	g, err := server.Start(context.Background(), server.Options{
		DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: path, NatsListen: "127.0.0.1:-1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), // the fingerprint key made on first start, as the quickstart's
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	return g, addr, dataDir
}

func demoCall(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func resultText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The example's get_release (method GET) reaches the demo target with its
// argument as ?release_id=, which is what the target reads: the arguments
// went as a JSON body before, and the target answered release_id "".
func TestMCPExampleGetReleaseSendsQuery(t *testing.T) {
	g, _ := startDemo(t, nil)
	s, err := mcpSession(t, g, "demo-agent-token")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := demoCall(t, s, "get_release", map[string]any{"release_id": "r8"})
	if r.IsError || !strings.Contains(resultText(r), `"release_id":"r8"`) {
		t.Fatalf("get_release r8: %s", resultText(r))
	}
}

// A GET tool's argument that cannot be a query parameter (an array, an
// object, null) is refused before anything is recorded or sent.
func TestMCPGetToolNestedArgumentRefused(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfigWithLookup(t, tg)
	g := startMCPGateway(t, cfg, "")
	before := ledgerMsgs(t, g)
	for _, tasks := range []bool{false, true} {
		msg := modernCall(t, g, agentToken, 1, "lookup", map[string]any{"ids": []any{"a", "b"}}, nil, tasks)
		res, _ := msg["result"].(map[string]any)
		if res["isError"] != true || !strings.Contains(resultTextOf(res), `"ids" is an array`) || !strings.Contains(resultTextOf(res), "nothing was recorded or sent") {
			t.Fatalf("tasks %v: %v", tasks, msg)
		}
	}
	if n := tg.seen.Load(); n != 0 {
		t.Fatalf("the target saw %d requests", n)
	}
	if n := ledgerMsgs(t, g); n != before {
		t.Fatalf("%d events appended by a refused call", n-before)
	}
	msg := modernCall(t, g, agentToken, 2, "lookup", map[string]any{"ids": "a,b"}, nil, false)
	if rec := resultRecord(t, msg); rec["state"] != "completed" || tg.seen.Load() != 1 {
		t.Fatalf("a scalar argument: %v", msg)
	}
}

// resultTextOf is the text content of a raw JSON-RPC result.
func resultTextOf(res map[string]any) string {
	var b strings.Builder
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// A target that echoes its request (the demo target answers with the body
// it performed) put a declared secret argument back into the recorded
// result: the executions stream, the views, GetExecution and the MCP
// answer held "MCP-SECRET-TOKEN-88". The result is redacted before it is
// recorded: the secret is nowhere, its marker is where it was.
func TestMCPSecretEchoedByTargetIsRedacted(t *testing.T) {
	const secret, visible = "MCP-SECRET-TOKEN-88", "r8-visible-in-the-record"
	g, _, dataDir := startDemoDir(t, func(cfg string) string {
		if !strings.Contains(cfg, "      secrets: [token]") {
			t.Fatal("examples/portcullis.yaml: deploy_release no longer declares token a secret")
		}
		return cfg
	})
	s, err := mcpSession(t, g, "demo-agent-token")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := demoCall(t, s, "deploy_release", map[string]any{"release_id": visible, "token": secret})
	rec, _ := r.StructuredContent.(map[string]any)
	text := resultText(r)
	if r.IsError || rec["state"] != "completed" || !strings.Contains(text, visible) || !strings.Contains(text, `"token":"[secret:token]"`) {
		t.Fatalf("deploy_release: %s %v", text, rec)
	}
	if strings.Contains(text, secret) {
		t.Fatalf("the MCP answer holds the secret: %s", text)
	}
	id := rec["execution_id"].(string)
	got, err := client(g).GetExecution(context.Background(), connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if body := got.Msg.GetExecution().GetResultBody(); strings.Contains(body, secret) || !strings.Contains(body, "[secret:token]") {
		t.Fatalf("GetExecution's result body: %s", body)
	}
	// A retry gets the stored (redacted) result.
	if again := resultText(demoCall(t, s, "deploy_release", map[string]any{"release_id": visible, "token": secret})); strings.Contains(again, secret) {
		t.Fatalf("the stored result returned on a retry holds the secret: %s", again)
	}
	scanStored(t, g, secret, visible)
	g.Close(context.Background())
	// And nothing on disk holds it (the raw files, as far as they are not
	// compressed: the streams' and the views' logs are not).
	err = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mcpConfigWithLookup is mcpConfig with one more tool: lookup, a read_only
// GET on the target.
func mcpConfigWithLookup(t *testing.T, tg *target) string {
	cfg := mcpConfig(t, tg)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("  lookup:\n    channel: http\n    method: GET\n    target: "+tg.URL+"/lookup\n    retry: read_only\n")...)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}
