package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// DELIVERED is appended off the call's path, so a gateway can die after
// it answered and before any DELIVERED landed: a `portcullis serve` is
// SIGKILLed right after a tools/call returned its result (no later
// request, so no evidence either). The execution is
// COMPLETED_RESULT_NOT_DELIVERED; the agent's retry through the other
// gateway gets the stored result (nothing sent again, one effect), and
// only evidence there (the agent's acknowledgement) marks it DELIVERED.
func TestMCPGatewayKilledBeforeDeliveredRetryGetsStoredResult(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	natsAddr := freeAddr(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	serveProcess(t, t.TempDir(), addrA, cfg, "--nats-listen", natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-a")
	procB := serveProcess(t, t.TempDir(), addrB, cfg, "--nats-url", "nats://"+natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-b")
	params := &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "killed-before-delivered"}}

	r, err := agentSession(t, addrB).CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	first := structured(t, r)
	id, _ := first["execution_id"].(string)
	if first["state"] != "completed" || id == "" {
		t.Fatalf("first call: %v", first)
	}
	if err := procB.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = procB.Process.Wait()

	a := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addrA)
	get := func() *pb.Execution {
		t.Helper()
		res, err := a.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetExecution()
	}
	if x := get(); x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
		t.Fatalf("after the gateway died: %v, want COMPLETED_RESULT_NOT_DELIVERED", x.GetState())
	}

	sa := agentSession(t, addrA)
	r, err = sa.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	rec := structured(t, r)
	if rec["state"] != "completed" || rec["execution_id"] != id || !strings.Contains(fmt.Sprint(rec["why"]), "stored result") {
		t.Fatalf("retry through the survivor: %v", rec)
	}
	if n := tg.performed.Load(); n != 1 {
		t.Fatalf("target performed %d, want 1", n)
	}
	if x := get(); x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
		t.Fatalf("after the retry, before any evidence: %v", x.GetState())
	}
	// Evidence on the survivor: the agent acknowledges the result.
	ack := &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "after-the-ack"},
		Meta: sdk.Meta{"io.portcullis/ack": id}}
	if _, err := sa.CallTool(ctx, ack); err != nil {
		t.Fatal(err)
	}
	for stop := time.Now().Add(10 * time.Second); get().GetState() != pb.State_STATE_DELIVERED; {
		if time.Now().After(stop) {
			t.Fatalf("still %v after the agent acknowledged it", get().GetState())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Many results acknowledged in one message are marked DELIVERED together
// (one group of the marker), off the acknowledgement's path, and only on
// evidence: before the acknowledgement, and after another agent's, every
// one of them stays COMPLETED_RESULT_NOT_DELIVERED.
func TestMCPDeliveredInGroupsOnlyOnEvidence(t *testing.T) {
	tg := newTarget(t)
	g := startMCPGateway(t, identityConfig(t, tg), "")
	const calls = 12
	ids := make([]string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, body := modernRequest(1, "tools/call", "deploy_release", map[string]any{"arguments": map[string]any{"release_id": fmt.Sprintf("grp-%d", i)}}, nil, false)
			r := rawPost(t, g, agentToken, h, body) // a fresh connection each: no evidence between them
			if r.code != http.StatusOK {
				t.Errorf("tools/call %d: HTTP %d %s", i, r.code, r.body)
				return
			}
			ids[i], _ = resultRecord(t, r.message(t))["execution_id"].(string)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	notDelivered := func(when string, ids []string) {
		t.Helper()
		for _, id := range ids {
			if x := getExecution(t, g, id); x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
				t.Fatalf("%s: %s is %v", when, id, x.GetState())
			}
		}
	}
	ackOf := func(ids ...string) string {
		list, _ := json.Marshal(ids)
		return `{"jsonrpc":"2.0","method":"notifications/io.portcullis/ack","params":{"_meta":{"io.portcullis/ack":` + string(list) + `}}}`
	}
	post := func(token, body string) {
		t.Helper()
		if r := rawPost(t, g, token, nil, body); r.code != http.StatusAccepted {
			t.Fatalf("ack: %d %s", r.code, r.body)
		}
	}
	notDelivered("before any evidence", ids)
	post(otherToken, ackOf(ids...))
	// The marker takes its queue in order, a group at a time: once an
	// acknowledgement queued after ids[0] was delivered has landed, the
	// group that held the other agent's marks is done.
	post(agentToken, ackOf(ids[0]))
	waitState(t, g, ids[0], "STATE_DELIVERED")
	post(agentToken, ackOf(ids[1]))
	waitState(t, g, ids[1], "STATE_DELIVERED")
	notDelivered("after another agent's acknowledgement", ids[2:])
	post(agentToken, ackOf(ids...))
	for _, id := range ids {
		waitState(t, g, id, "STATE_DELIVERED")
	}
	for _, id := range ids {
		if x := getExecution(t, g, id); x.GetDeliveredAt() == nil {
			t.Fatalf("%s delivered without delivered_at", id)
		}
	}
}
