package test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// ledgerMsgs counts the messages in every execution stream of g.
func ledgerMsgs(t *testing.T, g *server.Gateway) uint64 {
	t.Helper()
	js, err := jetstream.New(natsConnect(t, g, natsauth.Analyst))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, name := range g.Lanes.Streams() {
		n += streamCount(t, must(js.Stream(context.Background(), name)))
	}
	return n
}

// A malformed _meta key of ours is refused with a clear error and changes
// nothing. Before, a non-string value read as absent: operation keys 1001
// and 1002 (numbers) were both dropped and the second call was matched by
// fingerprint to the first (a second operation swallowed); an object
// intent scope widened the scope to the whole agent.
func TestMCPMalformedMetaRefused(t *testing.T) {
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	args := map[string]any{"release_id": "meta-1"}
	before := ledgerMsgs(t, g)
	refusedWith := func(meta map[string]any, want string) {
		t.Helper()
		h, body := modernRequest(1, "tools/call", "deploy_release", map[string]any{"arguments": args}, meta, false)
		r := rawPost(t, g, agentToken, h, body)
		msg := r.message(t)
		e, _ := msg["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), want) ||
			!strings.Contains(e["message"].(string), "nothing was recorded") {
			t.Fatalf("%v: HTTP %d %v, want the error %q", meta, r.code, msg, want)
		}
	}
	refusedWith(map[string]any{"io.portcullis/operation-key": 1001}, `"io.portcullis/operation-key" must be a string, got a number`)
	refusedWith(map[string]any{"io.portcullis/operation-key": 1002}, `must be a string, got a number`)
	refusedWith(map[string]any{"io.portcullis/intent-scope": map[string]any{"a": 1}}, `"io.portcullis/intent-scope" must be a string, got an object`)
	refusedWith(map[string]any{"idempotency-key": ""}, `is empty`)
	refusedWith(map[string]any{"io.portcullis/operation_key": "op-1"}, `unknown _meta key "io.portcullis/operation_key"`)

	// Through the SDK client on a 2025-11-25 session: a JSON-RPC error.
	s, err := mcpLegacySession(g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: args,
		Meta: sdk.Meta{"io.portcullis/operation-key": 1001}})
	if err == nil || !strings.Contains(err.Error(), "must be a string, got a number") {
		t.Fatalf("SDK session, numeric operation key: %v", err)
	}
	if n := tg.seen.Load(); n != 0 {
		t.Fatalf("the target saw %d requests", n)
	}
	if n := ledgerMsgs(t, g); n != before {
		t.Fatalf("%d events appended by refused calls", n-before)
	}

	// A malformed acknowledgement acknowledges nothing, the good id in it
	// included (and a notification gets 400, not 202).
	id := resultRecord(t, modernCall(t, g, agentToken, 2, "deploy_release", args, nil, false))["execution_id"].(string)
	ack := `{"jsonrpc":"2.0","method":"notifications/io.portcullis/ack","params":{"_meta":{"io.portcullis/ack":["` + id + `",7]}}}`
	if r := rawPost(t, g, agentToken, nil, ack); r.code != http.StatusBadRequest || !strings.Contains(r.body, "must be an execution id") {
		t.Fatalf("malformed ack: %d %s", r.code, r.body)
	}
	h, body := modernRequest(3, "ping", "", nil, map[string]any{"io.portcullis/ack": []any{id, "act_nope"}}, false)
	if r := rawPost(t, g, agentToken, h, body); !strings.Contains(r.body, "is not an execution id") {
		t.Fatalf("ping with a malformed ack: %d %s", r.code, r.body)
	}
	waitState(t, g, id, "STATE_COMPLETED_RESULT_NOT_DELIVERED")
	if r := rawPost(t, g, agentToken, nil, strings.Replace(ack, ",7]", "]", 1)); r.code != http.StatusAccepted {
		t.Fatalf("ack: %d %s", r.code, r.body)
	}
	waitState(t, g, id, "STATE_DELIVERED")
	if x := getExecution(t, g, id); x.GetState() != pb.State_STATE_DELIVERED {
		t.Fatal(x.GetState())
	}
}
