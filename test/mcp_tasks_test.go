package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/server"
)

func tasksRequest(t *testing.T, g *server.Gateway, token string, id int, method, taskID string) map[string]any {
	t.Helper()
	h, body := modernRequest(id, method, "", map[string]any{"taskId": taskID}, nil, true)
	r := rawPost(t, g, token, h, body)
	if r.code != 200 {
		t.Fatalf("%s: HTTP %d %s", method, r.code, r.body)
	}
	return r.message(t)
}

// pollTask asks tasks/get on g until the task leaves "working" (bounded).
func pollTask(t *testing.T, g *server.Gateway, taskID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _ := tasksRequest(t, g, agentToken, 9, "tasks/get", taskID)["result"].(map[string]any)
		if res != nil && res["status"] != "working" {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still working: %v", taskID, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Durable MCP tasks with two gateways: a call that has not finished within
// task_after answers a task handle whose taskId is the execution id
// (stored before the handle is returned); tasks/get on the other gateway,
// and on a gateway started afterwards, answers from the ledger; the target
// counts one effect. A call awaiting approval is input_required, and
// tasks/cancel denies it; a dispatched action cannot be called back.
func TestMCPTasksOnAnyGateway(t *testing.T) {
	tg := newTarget(t)
	cfg := identityConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)

	tg.delay.Store(int64(600 * time.Millisecond)) // longer than task_after (100ms)
	key := map[string]any{"io.portcullis/operation-key": "job-1"}
	msg := modernCall(t, g1, agentToken, 1, "slow_job", map[string]any{"n": 1}, key, true)
	handle, _ := msg["result"].(map[string]any)
	taskID, _ := handle["taskId"].(string)
	if handle["resultType"] != "task" || !strings.HasPrefix(taskID, "act_") || handle["status"] != "working" {
		t.Fatalf("want a task handle: %v", msg)
	}
	if x := getExecution(t, g2, taskID); x.GetTool() != "slow_job" {
		t.Fatalf("the task's execution is not in the ledger: %v", x)
	}
	done := pollTask(t, g2, taskID)
	res, _ := done["result"].(map[string]any)
	rec, _ := res["structuredContent"].(map[string]any)
	if done["status"] != "completed" || rec["state"] != "completed" || rec["execution_id"] != taskID || tg.performed.Load() != 1 {
		t.Fatalf("tasks/get on the other gateway: %v; target performed %d", done, tg.performed.Load())
	}
	// Another agent sees nothing.
	if other := tasksRequestAs(t, g2, otherToken, taskID); other["result"] != nil || other["error"] == nil {
		t.Fatalf("another agent's tasks/get: %v", other)
	}
	// A gateway started afterwards answers from the ledger too.
	g3 := startMCPGateway(t, cfg, g1.NatsURL)
	if late := pollTask(t, g3, taskID); late["status"] != "completed" {
		t.Fatalf("tasks/get on a new gateway: %v", late)
	}
	// A retry of the call (same key) gets the stored result at once: one effect.
	retry := modernCall(t, g2, agentToken, 2, "slow_job", map[string]any{"n": 1}, key, true)
	if rr := resultRecord(t, retry); rr["execution_id"] != taskID || tg.performed.Load() != 1 {
		t.Fatalf("retry: %v; target performed %d", retry, tg.performed.Load())
	}
	// A dispatched action cannot be called back.
	cancel := tasksRequest(t, g2, agentToken, 3, "tasks/cancel", taskID)
	if e, _ := cancel["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "cannot be called back") {
		t.Fatalf("tasks/cancel after dispatch: %v", cancel)
	}

	// Awaiting approval: input_required at once; cancelled before dispatch.
	msg = modernCall(t, g1, agentToken, 4, "approve_job", map[string]any{"n": 2}, nil, true)
	handle, _ = msg["result"].(map[string]any)
	taskID, _ = handle["taskId"].(string)
	if handle["resultType"] != "task" || handle["status"] != "input_required" {
		t.Fatalf("awaiting approval: %v", msg)
	}
	if got, _ := tasksRequest(t, g2, agentToken, 5, "tasks/get", taskID)["result"].(map[string]any); got["status"] != "input_required" {
		t.Fatalf("tasks/get awaiting approval: %v", got)
	}
	cancelled, _ := tasksRequest(t, g2, agentToken, 6, "tasks/cancel", taskID)["result"].(map[string]any)
	if cancelled["status"] != "cancelled" || getExecution(t, g1, taskID).GetState() != pb.State_STATE_DENIED {
		t.Fatalf("tasks/cancel before dispatch: %v", cancelled)
	}
	if got, _ := tasksRequest(t, g1, agentToken, 7, "tasks/get", taskID)["result"].(map[string]any); got["status"] != "cancelled" {
		t.Fatalf("tasks/get after cancel: %v", got)
	}
	if tg.seen.Load() != 1 {
		t.Fatalf("target received %d requests, want 1", tg.seen.Load())
	}
	// A client that did not declare the extension gets the answer itself.
	plain := modernCall(t, g1, agentToken, 8, "slow_job", map[string]any{"n": 3}, nil, false)
	if rr := resultRecord(t, plain); rr["state"] != "completed" || tg.performed.Load() != 2 {
		t.Fatalf("without the tasks extension: %v", plain)
	}
}

func tasksRequestAs(t *testing.T, g *server.Gateway, token, taskID string) map[string]any {
	t.Helper()
	h, body := modernRequest(11, "tasks/get", "", map[string]any{"taskId": taskID}, nil, true)
	return rawPost(t, g, token, h, body).message(t)
}

// approveOver approves a pending execution through the Connect
// ApprovalService of g, as a person would.
func approveOver(t *testing.T, g *server.Gateway, id string) {
	t.Helper()
	if code, out := rpc(t, g.Addr, svc.ApprovalServiceApproveProcedure, "", fmt.Sprintf(`{"executionId": %q}`, id)); code != "ok" {
		t.Fatalf("Approve %s: %s %v", id, code, out)
	}
}

// pollTaskUntil asks tasks/get on g until the task has status want,
// failing on any other status but working (bounded).
func pollTaskUntil(t *testing.T, g *server.Gateway, taskID, want string) map[string]any {
	t.Helper()
	var res map[string]any
	waitFor(t, "task "+taskID+" "+want, func() bool {
		res, _ = tasksRequest(t, g, agentToken, 9, "tasks/get", taskID)["result"].(map[string]any)
		if s := res["status"]; s != want && s != "working" {
			t.Fatalf("task %s: want %s, got %v", taskID, want, res)
		}
		return res["status"] == want
	})
	return res
}

// The audit's scenario (s7b): a per_use tool called with the tasks
// extension answers input_required; a person approves over Connect; the
// agent only polls tasks/get, and the task goes on to completed with the
// result, one effect at the target. Approved on the gateway that received
// the call, the approval dispatches it; approved on another gateway, the
// agent's tasks/get there is forwarded to the receiving one, which
// dispatches; when the receiving gateway is gone, no copy of the call is
// left (the ledger keeps none) and the agent is told to call the tool
// again instead of "working" forever. A denied task is never sent, and a
// tasks/get racing a retry of the call dispatches once.
func TestMCPApprovedTaskIsDispatched(t *testing.T) {
	tg := newTarget(t)
	cfg := identityConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	open := func(n int) string {
		t.Helper()
		msg := modernCall(t, g1, agentToken, n, "approve_job", map[string]any{"n": n}, nil, true)
		h, _ := msg["result"].(map[string]any)
		id, _ := h["taskId"].(string)
		if h["status"] != "input_required" || id == "" {
			t.Fatalf("want an input_required task: %v", msg)
		}
		return id
	}
	completed := func(done map[string]any, id string, performed int32) {
		t.Helper()
		res, _ := done["result"].(map[string]any)
		rec, _ := res["structuredContent"].(map[string]any)
		if rec["state"] != "completed" || rec["execution_id"] != id || tg.performed.Load() != performed || tg.seen.Load() != performed {
			t.Fatalf("task %s: %v; target performed %d of %d requests, want %d", id, done, tg.performed.Load(), tg.seen.Load(), performed)
		}
		if x := getExecution(t, g1, id); x.GetDispatchCount() != 1 || x.GetAttachCount() != 0 {
			t.Fatalf("task %s dispatched %d times, %d attached calls", id, x.GetDispatchCount(), x.GetAttachCount())
		}
	}

	// Approved where the call was received: dispatched by the approval.
	id := open(1)
	approveOver(t, g1, id)
	completed(pollTaskUntil(t, g1, id, "completed"), id, 1)

	// Approved on the other gateway, and the agent polls only that one
	// (a load balancer's choice): it holds no copy of the call, so it
	// forwards the tasks/get to the gateway that received the call, whose
	// copy is dispatched; the agent sees working, then completed.
	id = open(2)
	approveOver(t, g2, id)
	got, _ := tasksRequest(t, g2, agentToken, 10, "tasks/get", id)["result"].(map[string]any)
	if msg, _ := got["statusMessage"].(string); got["status"] != "working" || !strings.Contains(msg, "being dispatched now") {
		t.Fatalf("tasks/get on a gateway without the call: %v", got)
	}
	completed(pollTaskUntil(t, g2, id, "completed"), id, 2)
	completed(pollTaskUntil(t, g1, id, "completed"), id, 2)

	// A tasks/get that another gateway forwarded (it carries
	// X-Portcullis-Arrival-Age) is answered where it arrives, never sent
	// on again: no loop between gateways. Here g2 answers it itself.
	id = open(5)
	approveOver(t, g2, id)
	fh, fbody := modernRequest(23, "tasks/get", "", map[string]any{"taskId": id}, nil, true)
	fh["X-Portcullis-Arrival-Age"] = "unknown"
	got, _ = rawPost(t, g2, agentToken, fh, fbody).message(t)["result"].(map[string]any)
	if got["status"] != "input_required" || tg.seen.Load() != 2 {
		t.Fatalf("a forwarded tasks/get was sent on: %v; target saw %d", got, tg.seen.Load())
	}
	completed(pollTaskUntil(t, g2, id, "completed"), id, 3)

	// The gateway that received the call is gone (its copy with it):
	// the other one says what to do instead of working, and the call
	// made again resumes the execution, dispatched once.
	g3 := startMCPGateway(t, cfg, g1.NatsURL)
	msg := modernCall(t, g3, agentToken, 20, "approve_job", map[string]any{"n": 20}, nil, true)
	h, _ := msg["result"].(map[string]any)
	gone, _ := h["taskId"].(string)
	if h["status"] != "input_required" || gone == "" {
		t.Fatalf("want an input_required task: %v", msg)
	}
	g3.Close(context.Background())
	approveOver(t, g2, gone)
	got, _ = tasksRequest(t, g2, agentToken, 21, "tasks/get", gone)["result"].(map[string]any)
	if msg, _ := got["statusMessage"].(string); got["status"] != "input_required" || !strings.Contains(msg, "call the tool again with the same arguments") {
		t.Fatalf("tasks/get when the receiving gateway is gone: %v", got)
	}
	if tg.seen.Load() != 3 {
		t.Fatalf("sent before the call was made again: target saw %d", tg.seen.Load())
	}
	modernCall(t, g2, agentToken, 22, "approve_job", map[string]any{"n": 20}, nil, true)
	pollTaskUntil(t, g2, gone, "completed")
	if x := getExecution(t, g2, gone); x.GetDispatchCount() != 1 || x.GetAttachCount() != 1 || tg.performed.Load() != 4 || tg.seen.Load() != 4 {
		t.Fatalf("the call made again: dispatched %d times, %d attached calls; target performed %d of %d requests", x.GetDispatchCount(), x.GetAttachCount(), tg.performed.Load(), tg.seen.Load())
	}

	// Denied: never sent, on either gateway.
	id = open(3)
	if code, out := rpc(t, g2.Addr, svc.ApprovalServiceDenyProcedure, "", fmt.Sprintf(`{"executionId": %q, "reason": "no"}`, id)); code != "ok" {
		t.Fatalf("Deny: %s %v", code, out)
	}
	if got := pollTaskUntil(t, g1, id, "failed"); getExecution(t, g1, id).GetState() != pb.State_STATE_DENIED || tg.seen.Load() != 4 {
		t.Fatalf("denied task: %v; target saw %d", got, tg.seen.Load())
	}

	// Approved elsewhere, then the agent's tasks/get and a retry of the
	// call on the other gateway race: the DISPATCHED compare-and-set lets
	// one of them send.
	id = open(4)
	approveOver(t, g2, id)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); tasksRequest(t, g1, agentToken, 11, "tasks/get", id) }()
	go func() {
		defer wg.Done()
		modernCall(t, g2, agentToken, 12, "approve_job", map[string]any{"n": 4}, nil, true)
	}()
	wg.Wait()
	done := pollTaskUntil(t, g1, id, "completed")
	if tg.performed.Load() != 5 || tg.seen.Load() != 5 || getExecution(t, g1, id).GetDispatchCount() != 1 {
		t.Fatalf("raced resume: %v; target performed %d of %d requests", done, tg.performed.Load(), tg.seen.Load())
	}
}
