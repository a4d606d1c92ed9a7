package test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// An operation key on a read_only call is refused before anything is
// recorded (audit s12). Before, read_only calls were recorded with the key
// but never matched: the same key with other arguments made a second
// execution, and the key was then a "new" operation on a side-effecting
// tool, so one key silently meant several operations.
func TestOperationKeyOnReadOnlyRefused(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", &clock{})
	c := client(g)
	s := ledgerStream(t, g)

	before := streamCount(t, s)
	for _, release := range []string{"r1", "r2"} {
		_, err := c.Begin(ctx, beginReq("get_release", args(t, map[string]any{"release_id": release}), "op-ro-1", "1"))
		wantCode(t, err, connect.CodeInvalidArgument, "get_release is read_only", "send the call without one")
	}
	if n := streamCount(t, s); n != before {
		t.Fatalf("refused read_only calls appended %d events", n-before)
	}
	// Without the key the read_only call is recorded as before.
	if _, err := c.Begin(ctx, beginReq("get_release", args(t, map[string]any{"release_id": "r1"}), "", "2")); err != nil {
		t.Fatal(err)
	}
	// The key bound nothing, so its first use on a side-effecting tool is
	// the one operation it names, and a second request under it is refused.
	p, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"amount": 5}), "op-ro-1", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("first use of the key: %v", p.Msg.GetDecision())
	}
	_, err = c.Begin(ctx, beginReq("get_release", args(t, map[string]any{"release_id": "r1"}), "op-ro-1", "4"))
	wantCode(t, err, connect.CodeInvalidArgument, "read_only")
}

// The same on /mcp: a JSON-RPC invalid params error naming the reason,
// nothing recorded or sent, with and without tasks, through both
// io.portcullis/operation-key and idempotency-key.
func TestMCPOperationKeyOnReadOnlyRefused(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfigWithLookup(t, tg)
	g := startMCPGateway(t, cfg, "")
	before := ledgerMsgs(t, g)
	for i, meta := range []map[string]any{
		{"io.portcullis/operation-key": "op-ro-2"},
		{"idempotency-key": "op-ro-2"},
	} {
		for _, tasks := range []bool{false, true} {
			h, body := modernRequest(10+i, "tools/call", "lookup", map[string]any{"arguments": map[string]any{"q": i}}, meta, tasks)
			r := rawPost(t, g, agentToken, h, body)
			msg := r.message(t)
			e, _ := msg["error"].(map[string]any)
			if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "lookup is read_only") ||
				!strings.Contains(e["message"].(string), "nothing was recorded") {
				t.Fatalf("%v tasks %v: HTTP %d %v, want invalid params", meta, tasks, r.code, msg)
			}
		}
	}
	if n := tg.seen.Load(); n != 0 {
		t.Fatalf("the target saw %d requests", n)
	}
	if n := ledgerMsgs(t, g); n != before {
		t.Fatalf("%d events appended by refused calls", n-before)
	}
	// Without a key it runs.
	rec := resultRecord(t, modernCall(t, g, agentToken, 20, "lookup", map[string]any{"q": 1}, nil, false))
	if rec["state"] != "completed" {
		t.Fatalf("keyless read_only call: %v", rec)
	}
}
