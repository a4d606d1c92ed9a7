package test

import (
	"strings"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
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
