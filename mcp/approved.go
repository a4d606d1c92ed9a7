package mcp

import (
	"context"
	"sync"

	"github.com/portcullis-dev/portcullis/config"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Approved tasks. A per_use call answered with a task waits for a person;
// once approved (AUTHORIZED) nothing else would send it: the agent polls
// tasks/get, it does not call the tool again. But the ledger keeps no copy
// of a call's arguments (the fingerprint holds a canonical record with
// ignored fields dropped and secrets as digests), so only the gateway that
// received the call can send it. That gateway holds the call in memory
// until it is decided and resumes it when the approval is taken here
// (Approved) or when its agent asks tasks/get. The resume is the driver's
// RESUME of an AUTHORIZED execution, so the DISPATCHED compare-and-set
// decides between this, a retry of the call and another gateway: one
// dispatch. Another gateway holds no copy: it forwards the agent's
// tasks/get to the one that received the call (tasks.go, forwardTask).
// Where no copy is left (that gateway restarted or is gone), nothing can
// send it; tasks/get tells the agent to call the tool again.
const (
	// approvalsHeldMax bounds the calls held for tasks awaiting approval
	// (arguments are at most 64 KiB each); the oldest is forgotten first,
	// and its task tells the agent to call the tool again.
	approvalsHeldMax = 1024
)

// heldCall is a call this gateway received whose task awaits approval.
type heldCall struct {
	actor   string
	tool    config.Tool
	in      ledger.BeginInput
	resumed bool // a resume was started here; it runs to its end once
}

// approvals holds the calls of tasks awaiting approval on this gateway.
type approvals struct {
	mu    sync.Mutex
	calls map[string]*heldCall // by execution id
	order []string             // insertion order, for forgetting the oldest
}

// hold keeps the call of a task that awaits approval. A tool that declares
// secrets is not held: its clear values are kept nowhere past Begin
// (docs/mcp.md, secrets), so such a task is resumed only by a new call.
func (a *approvals) hold(id, actor string, t config.Tool, in ledger.BeginInput) {
	if len(t.Contract.Fingerprint.Secrets) > 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls == nil {
		a.calls = map[string]*heldCall{}
	}
	if _, ok := a.calls[id]; ok {
		return
	}
	for len(a.order) >= approvalsHeldMax {
		delete(a.calls, a.order[0])
		a.order = a.order[1:]
	}
	a.calls[id] = &heldCall{actor: actor, tool: t, in: in}
	a.order = append(a.order, id)
}

// take hands out the held call of x for one resume, only for the agent
// that made it; nil when this gateway holds none or a resume already
// started here.
func (a *approvals) take(x *pb.Execution) *heldCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls[x.GetExecutionId()]
	if c == nil || c.resumed || c.actor != x.GetActor() {
		return nil
	}
	c.resumed = true
	return c
}

// holds reports whether the call of x is held here (resumed or not).
func (a *approvals) holds(x *pb.Execution) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls[x.GetExecutionId()]
	return c != nil && c.actor == x.GetActor()
}

// forget drops a call whose execution was decided.
func (a *approvals) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.calls[id]; !ok {
		return
	}
	delete(a.calls, id)
	for i, o := range a.order {
		if o == id {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
}

// Approved is told of an approval taken on this gateway (ApprovalService,
// the console): when this gateway holds the task's call, it is dispatched
// now, so the agent's next tasks/get reports it working or completed.
func (g *Gateway) Approved(x *pb.Execution) {
	if x.GetState() == pb.State_STATE_AUTHORIZED {
		g.resumeApproved(x)
	}
}

// resumeApproved starts, in the background, the dispatch of an approved
// execution whose call this gateway holds; it reports whether one is (or
// was) started here. The driver's resume wins DISPATCHED by
// compare-and-set only from AUTHORIZED: a denied or cancelled execution is
// never sent, and one another call dispatched is only followed.
func (g *Gateway) resumeApproved(x *pb.Execution) bool {
	c := g.approvals.take(x)
	if c == nil {
		return g.approvals.holds(x)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), taskRunMax)
		defer cancel()
		a := g.driver.Resume(ctx, c.tool, c.in, x)
		g.approvals.forget(x.GetExecutionId())
		if a.Refused {
			g.log.Warn("approved task not resumed", "execution", x.GetExecutionId(), "why", a.Why)
		}
	}()
	return true
}
