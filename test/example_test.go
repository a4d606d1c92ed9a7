package test

import (
	"context"
	"io"
	"log/slog"
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

// The README's quickstart: the demo target (examples/target) and the
// example config with its demo agent token lead to a working tools/call,
// performed once at the target. The test moves the target off its fixed
// port (127.0.0.1:9090) so it can run beside anything.
func TestQuickstartDemo(t *testing.T) {
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/releases?release_id=x")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo target never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling until it listens
	}

	cfg, err := os.ReadFile("../examples/portcullis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "127.0.0.1:9090") {
		t.Fatal("the example config no longer points at the demo target")
	}
	path := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(cfg), "127.0.0.1:9090", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: path, NatsListen: "127.0.0.1:-1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })

	sess, err := mcpSession(t, g, "demo-agent-token")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "2026.12.01"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := res.StructuredContent.(map[string]any)
	if res.IsError || rec["state"] != "completed" {
		t.Fatalf("tools/call deploy_release: %+v", res)
	}
	id, _ := rec["execution_id"].(string)
	resp, err := http.Get("http://" + addr + "/status/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"performed":1`) {
		t.Fatalf("the target's record of %s: %s %s", id, resp.Status, body)
	}
}
