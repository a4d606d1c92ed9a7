package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Durable MCP tasks (extension io.modelcontextprotocol/tasks, SEP-2663).
// A task is an execution: its taskId is the execution id, stored in the
// ledger before the handle is returned, so tasks/get and tasks/cancel work
// on any gateway and across restarts; nothing lives in one process's
// memory.
const (
	taskPollInterval = 500 * time.Millisecond
	// taskRunMax bounds the driver's work for a call answered with a task
	// handle (the send itself runs to the tool's own timeout).
	taskRunMax = dispatch.WaitMax + 10*time.Second
	// cancelledReason marks a denial that was the agent's tasks/cancel.
	cancelledReason = "cancelled by the agent (tasks/cancel) before it was dispatched"
	taskLookupMax   = 10 * time.Second
)

// JSON-RPC error codes the front door answers itself.
const (
	codeInvalidParams = -32602
	codeInternal      = -32603
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// writeRPC answers one JSON-RPC request as application/json.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) {
	if len(id) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		resp["error"] = rerr
	} else {
		resp["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// refuseMeta answers a request whose _meta holds one of our keys
// malformed: the JSON-RPC error invalid params; a notification (no id)
// gets HTTP 400 with the error (id null), not 202.
func refuseMeta(w http.ResponseWriter, id json.RawMessage, err error) {
	rerr := &rpcError{Code: codeInvalidParams, Message: err.Error()}
	if len(id) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": rerr})
		return
	}
	writeRPC(w, id, nil, rerr)
}

func rfc3339(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

// taskStatus maps an execution's state to a task status and a plain
// statusMessage. resuming: x is AUTHORIZED and this gateway holds its call
// and dispatches it (approved.go).
func taskStatus(x *pb.Execution, resuming bool) (status, msg string) {
	switch x.GetState() {
	case pb.State_STATE_AWAITING_APPROVAL:
		return "input_required", "awaiting a person's approval; nothing was sent"
	case pb.State_STATE_ACCEPTED:
		return "working", "accepted; not dispatched yet"
	case pb.State_STATE_AUTHORIZED:
		by := "approved"
		if a := x.GetAuthorizedBy(); a != "" {
			by += " by " + a
		}
		if resuming {
			return "working", by + "; being dispatched now (once: the dispatch is a compare-and-set); tasks/get reports its outcome"
		}
		// Nothing here can send it: say exactly what will. Not "working",
		// which an agent would poll forever.
		return "input_required", by + ", but not dispatched: the ledger keeps no copy of a call's arguments, and this gateway holds none (another gateway received the call, or it restarted since; a tool with secrets is never held); call the tool again with the same arguments (and the same operation key, if the call had one): that call resumes this execution (" + x.GetExecutionId() + ") and dispatches it once; nothing was sent"
	case pb.State_STATE_DISPATCHED:
		return "working", dispatch.InFlightWhy(x)
	case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
		return "completed", "the target answered; the result is the stored one"
	case pb.State_STATE_OUTCOME_UNKNOWN:
		return "completed", "the outcome is unknown (" + x.GetReason() + "); nothing was resent; calling the tool again with the same operation key runs the recovery of its retry class"
	case pb.State_STATE_DENIED:
		if x.GetReason() == cancelledReason {
			return "cancelled", cancelledReason
		}
		return "failed", "denied: " + x.GetReason()
	case pb.State_STATE_NOT_SENT:
		return "failed", "not sent (" + x.GetReason() + "); nothing left the gateway; calling the tool again resumes this execution"
	case pb.State_STATE_NOT_EXECUTED:
		return "failed", "the target shows it was never performed; calling the tool again resumes this execution"
	}
	return "working", dispatch.StateName(x.GetState())
}

// task is the Task shape of an execution, with the final result (or error)
// once there is one.
func task(x *pb.Execution) map[string]any { return taskOf(x, false) }

// taskOf is task with the approved execution's resume known (taskStatus).
func taskOf(x *pb.Execution, resuming bool) map[string]any {
	status, msg := taskStatus(x, resuming)
	t := map[string]any{
		"taskId": x.GetExecutionId(), "status": status, "statusMessage": msg,
		"createdAt": rfc3339(x.GetAcceptedAt()), "lastUpdatedAt": rfc3339(x.GetUpdatedAt()),
		"pollIntervalMs": taskPollInterval.Milliseconds(),
		"_meta":          map[string]any{MetaExecution: record(dispatch.StateName(x.GetState()), x, msg)},
	}
	switch x.GetState() {
	case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
		t["result"] = storedResult(x, "")
	case pb.State_STATE_OUTCOME_UNKNOWN:
		state := dispatch.StateOutcomeUnknown
		if x.GetRetryClass() == pb.RetryClass_RETRY_CLASS_IRREVERSIBLE {
			state = dispatch.StateNeedsReview
		}
		t["result"] = stateResult(state, x, msg)
	case pb.State_STATE_DENIED, pb.State_STATE_NOT_SENT, pb.State_STATE_NOT_EXECUTED:
		if status == "failed" {
			t["error"] = rpcError{Code: codeInternal, Message: msg, Data: record(dispatch.StateName(x.GetState()), x, msg)}
		}
	}
	return t
}

// taskHandle is the CreateTaskResult answered instead of a CallToolResult.
func taskHandle(x *pb.Execution) map[string]any {
	t := task(x)
	delete(t, "result")
	delete(t, "error")
	t["resultType"] = "task"
	return t
}

// serveTaskCall runs a tools/call whose client declared the tasks
// extension: a call that awaits approval, or has not finished within the
// tool's task_after, is answered with a task handle (the execution is
// already durable); one that finished is answered as usual.
func (g *Gateway) serveTaskCall(w http.ResponseWriter, r *http.Request, actor, sid string, keys []string, msg message) {
	t, ok := g.tools[msg.Params.Name]
	if !ok {
		writeRPC(w, msg.ID, nil, &rpcError{Code: codeInvalidParams, Message: "unknown tool " + msg.Params.Name})
		return
	}
	in, refusal := g.prepare(callInput{actor: actor, tool: t, args: msg.Params.Arguments, meta: msg.meta(),
		session: sid, jsonrpcID: msg.jsonrpcID()})
	if refusal != nil {
		writeRPC(w, msg.ID, refusal, nil)
		return
	}
	if err := g.driver.Check(t, in); err != nil {
		writeRPC(w, msg.ID, refused("refused: "+err.Error()+"; nothing was recorded or sent"), nil)
		return
	}
	res, err := g.driver.Begin(r.Context(), in)
	if err != nil {
		writeRPC(w, msg.ID, refused("refused: "+err.Error()+"; nothing was sent"), nil)
		return
	}
	if res.Execution.GetState() == pb.State_STATE_AWAITING_APPROVAL {
		// Held so that the approval, not a second call, dispatches it.
		g.approvals.hold(res.Execution.GetExecutionId(), actor, t, in)
		writeRPC(w, msg.ID, taskHandle(res.Execution), nil)
		return
	}
	done := make(chan dispatch.Answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), taskRunMax)
		defer cancel()
		done <- g.driver.Act(ctx, t, in, res)
	}()
	after := t.TaskAfter
	if after <= 0 {
		after = config.DefaultTaskAfter
	}
	timer := time.NewTimer(after)
	defer timer.Stop()
	select {
	case a := <-done:
		g.answerTracked(w, r, actor, keys, msg.ID, a.Execution, a.State == dispatch.StateCompleted, toResult(a))
	case <-timer.C:
		x, err := g.lookup(r.Context(), res.Execution.GetExecutionId())
		if err != nil {
			x = res.Execution
		}
		writeRPC(w, msg.ID, taskHandle(x), nil)
	case <-r.Context().Done():
	}
}

// answerTracked writes an answer and, when it carries a stored result,
// lets delivery evidence follow it.
func (g *Gateway) answerTracked(w http.ResponseWriter, r *http.Request, actor string, keys []string, id json.RawMessage, x *pb.Execution, carries bool, result any) {
	nonce := ulid.Make().String()
	g.delivery.begin(nonce)
	if carries {
		g.delivery.carry(nonce, x.GetExecutionId())
	}
	tw := &trackingWriter{ResponseWriter: w}
	writeRPC(tw, id, result, nil)
	g.delivery.responded(r.Context(), nonce, actor, keys, responseConn(r), tw.completedAt(), tw.failed || r.Context().Err() != nil)
}

func (g *Gateway) lookup(ctx context.Context, id string) (*pb.Execution, error) {
	ctx, cancel := context.WithTimeout(ctx, taskLookupMax)
	defer cancel()
	return g.ledger.Get(ctx, id)
}

// serveTasks answers tasks/get and tasks/cancel from the ledger. A task of
// another agent is "not found": it sees nothing. forwarded: r came from
// another gateway (it is not sent on again).
func (g *Gateway) serveTasks(w http.ResponseWriter, r *http.Request, actor string, keys []string, msg message, forwarded bool) {
	id := msg.Params.TaskID
	notFound := &rpcError{Code: codeInvalidParams, Message: "task not found: " + id}
	if ledger.ValidateExecutionID(id) != nil {
		writeRPC(w, msg.ID, nil, notFound)
		return
	}
	x, err := g.lookup(r.Context(), id)
	switch {
	case errors.Is(err, ledger.ErrNotFound) || (err == nil && x.GetActor() != actor):
		writeRPC(w, msg.ID, nil, notFound)
		return
	case err != nil:
		writeRPC(w, msg.ID, nil, &rpcError{Code: codeInternal, Message: "the ledger could not be read: " + err.Error()})
		return
	}
	if msg.Method == methodTasksCancel {
		g.cancelTask(w, r, msg, x)
		return
	}
	resuming := false
	switch x.GetState() {
	case pb.State_STATE_AUTHORIZED:
		// Approved: the agent polls, it does not call again, so its
		// tasks/get resumes the task when this gateway holds the call,
		// else where the call was received.
		resuming = g.resumeApproved(x)
		if !resuming && !forwarded && msg.Method == methodTasksGet && g.forwardTask(w, r, x) {
			return
		}
	case pb.State_STATE_AWAITING_APPROVAL, pb.State_STATE_ACCEPTED:
	default:
		g.approvals.forget(id) // decided, or dispatched by another call
	}
	completed := x.GetState() == pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED
	g.answerTracked(w, r, actor, keys, msg.ID, x, completed, taskOf(x, resuming))
}

// cancelTask denies an execution that was not dispatched; a dispatched
// action cannot be called back, and the answer says so plainly.
func (g *Gateway) cancelTask(w http.ResponseWriter, r *http.Request, msg message, x *pb.Execution) {
	switch x.GetState() {
	case pb.State_STATE_ACCEPTED, pb.State_STATE_AWAITING_APPROVAL, pb.State_STATE_AUTHORIZED, pb.State_STATE_NOT_SENT:
		actor := x.GetActor()
		ctx, cancel := context.WithTimeout(r.Context(), taskLookupMax)
		dx, err := g.ledger.Transition(ctx, ledger.Change{ExecutionID: x.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DENIED,
			Apply: func(x *pb.Execution) { x.Reason, x.AuthorizedBy = cancelledReason, actor }})
		cancel()
		if err == nil {
			g.approvals.forget(x.GetExecutionId())
			writeRPC(w, msg.ID, task(dx), nil)
			return
		}
		var ite *ledger.IllegalTransitionError
		if !errors.As(err, &ite) {
			writeRPC(w, msg.ID, nil, &rpcError{Code: codeInternal, Message: "not cancelled: " + err.Error()})
			return
		}
		// Dispatched meanwhile: say so below.
		if cur, err := g.lookup(r.Context(), x.GetExecutionId()); err == nil {
			x = cur
		}
	case pb.State_STATE_DENIED:
		writeRPC(w, msg.ID, task(x), nil)
		return
	}
	why := "execution " + x.GetExecutionId() + " was dispatched"
	if ts := rfc3339(x.GetDispatchedAt()); ts != "" {
		why += " at " + ts
	}
	why += ": a dispatched action cannot be called back; nothing was cancelled; tasks/get reports its outcome"
	writeRPC(w, msg.ID, nil, &rpcError{Code: codeInvalidParams, Message: why,
		Data: record(dispatch.StateName(x.GetState()), x, why)})
}

// Forwarding a tasks/get (forwardTask).
const (
	taskForwardMax    = 5 * time.Second // the whole exchange with the other gateway
	taskForwardAnswer = 1 << 20         // the largest answer relayed
)

// peerClient sends forwarded tasks/get requests to other gateways.
var peerClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// forwardTask relays an agent's tasks/get of an approved task whose call
// this gateway does not hold to the gateway that received the call (the
// execution's gateway_id, at the address it enrolled with), which may hold
// it: there the tasks/get resumes it (approved.go), as the approval would
// have had it been taken there. So an agent behind a load balancer, or one
// approved through another gateway's console, sees its task go on. The
// request keeps the agent's token (the other gateway authenticates the
// agent itself, and only an enrolled address receives it) and loses its
// session id (the task is the ledger's, not the session's); it carries
// arrivalAgeHeader, so that gateway takes no delivery evidence from the
// forwarding connection and never forwards it again. It reports whether it
// answered w: when that gateway is this one, unknown, unreachable or
// answers anything but a JSON-RPC answer, the caller answers itself.
func (g *Gateway) forwardTask(w http.ResponseWriter, r *http.Request, x *pb.Execution) bool {
	g.mu.Lock()
	owners := g.owners
	g.mu.Unlock()
	if owners == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), taskForwardMax)
	defer cancel()
	base, err := owners.GatewayURL(ctx, x.GetGatewayId())
	if err != nil || base == "" {
		return false
	}
	body, err := io.ReadAll(r.Body) // the front door's copy of the request
	if err != nil {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return false
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept", "Mcp-Protocol-Version"} {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(arrivalAgeHeader, "unknown")
	resp, err := peerClient.Do(req)
	if err != nil {
		g.log.Debug("tasks/get not forwarded to the gateway that received the call", "execution", x.GetExecutionId(), "gateway", x.GetGatewayId(), "err", err)
		return false
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, taskForwardAnswer+1))
	if err != nil || resp.StatusCode != http.StatusOK || len(answer) > taskForwardAnswer || !isRPCAnswer(answer) {
		g.log.Debug("tasks/get forwarded, answer not relayed", "execution", x.GetExecutionId(), "gateway", x.GetGatewayId(), "status", resp.StatusCode)
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
	return true
}

// isRPCAnswer reports whether data is one JSON-RPC answer with a result
// (the SDK's decoder: version tag, id, no error).
func isRPCAnswer(data []byte) bool {
	m, err := jsonrpc.DecodeMessage(data)
	a, ok := m.(*jsonrpc.Response)
	return err == nil && ok && a.Error == nil && len(a.Result) > 0
}
