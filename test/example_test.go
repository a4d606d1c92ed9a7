package test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The README's quickstart: the demo target (examples/target) and the
// example config with its demo agent token lead to a working tools/call,
// performed once at the target. The test moves the target off its fixed
// port (127.0.0.1:9090) so it can run beside anything.
func TestQuickstartDemo(t *testing.T) {
	g, addr := startDemo(t, nil)
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
