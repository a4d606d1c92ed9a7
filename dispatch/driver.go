// Package dispatch is the recovery-table driver: it acts on the ledger's
// decision for one call (dispatch once through the DISPATCHED
// compare-and-set, wait for an in-flight execution, resend with the same
// key, ask the target's status or the SSH marker and resolve, resume a
// NOT_SENT execution) and sends through executors behind one small
// interface. /mcp and MCP tasks call it; it never speaks MCP, so the
// front doors only translate its Answer.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/executor"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Limits of the driver.
const (
	// WaitMax bounds how long an attached call follows an in-flight
	// execution before it answers "in flight".
	WaitMax         = 20 * time.Second
	pollEvery       = 50 * time.Millisecond
	recordMax       = 30 * time.Second // appending an observation, detached from the caller
	maxResolveDepth = 1                // a proven absence re-runs the call once
)

// States an Answer reports (the agent-facing words).
const (
	StateCompleted        = "completed"
	StateAwaitingApproval = "awaiting_approval"
	StateDenied           = "denied"
	StateNeedsReview      = "needs_review"
	StateOutcomeUnknown   = "outcome_unknown"
	StateInFlight         = "in_flight"
	StateNotSent          = "not_sent"
)

// Answer is where one call ended: a state, the execution it concerns, and
// why nothing (more) was sent. Refused answers carry no execution.
type Answer struct {
	State     string
	Execution *pb.Execution
	Why       string
	// Refused: the call was not accepted (nothing recorded, or nothing sent).
	Refused bool
}

// Driver acts on the recovery table. It is safe for concurrent use.
type Driver struct {
	ledger    *ledger.Service
	executors map[string]Executor // by channel
	log       *slog.Logger
	now       func() time.Time
	waitMax   time.Duration
}

// New returns a driver over l with the http and ssh executors; front
// doors add channels of their own (an upstream MCP server) with Handle.
func New(l *ledger.Service, log *slog.Logger) *Driver {
	return &Driver{ledger: l, log: log, now: time.Now, waitMax: WaitMax, executors: map[string]Executor{
		"http": HTTPExecutor{Client: executor.NewHTTP()},
		"ssh":  SSHExecutor{},
	}}
}

// SetWaitMax bounds how long an attached call follows an in-flight
// execution (WaitMax unless set; at most WaitMax).
func (d *Driver) SetWaitMax(w time.Duration) {
	if w > 0 && w <= WaitMax {
		d.waitMax = w
	}
}

// Handle sets the executor of a channel.
func (d *Driver) Handle(channel string, e Executor) { d.executors[channel] = e }

// Begin asks the ledger for its decision; the execution is durable when it
// returns.
func (d *Driver) Begin(ctx context.Context, in ledger.BeginInput) (ledger.BeginResult, error) {
	return d.ledger.Begin(ctx, in)
}

// Run begins the call and acts on the decision.
func (d *Driver) Run(ctx context.Context, t config.Tool, in ledger.BeginInput) Answer {
	res, err := d.Begin(ctx, in)
	if err != nil {
		return Answer{Refused: true, Why: "refused: " + err.Error() + "; nothing was sent"}
	}
	return d.Act(ctx, t, in, res)
}

// Act does what the recovery table says for Begin's decision.
func (d *Driver) Act(ctx context.Context, t config.Tool, in ledger.BeginInput, res ledger.BeginResult) Answer {
	return d.act(ctx, t, in, res, 0)
}

func (d *Driver) act(ctx context.Context, t config.Tool, in ledger.BeginInput, res ledger.BeginResult, depth int) Answer {
	x := res.Execution
	if res.Decision == pb.Decision_DECISION_NEW {
		switch x.GetState() {
		case pb.State_STATE_AWAITING_APPROVAL:
			return Answer{State: StateAwaitingApproval, Execution: x, Why: "the tool needs a person's approval for every use; nothing was sent"}
		case pb.State_STATE_DENIED:
			return Answer{State: StateDenied, Execution: x, Why: x.GetReason()}
		}
		return d.dispatch(ctx, t, x, in.Action.Arguments)
	}
	switch res.Recovery {
	case pb.Recovery_RECOVERY_RESUME, pb.Recovery_RECOVERY_RESEND_SAME_KEY:
		return d.dispatch(ctx, t, x, in.Action.Arguments)
	case pb.Recovery_RECOVERY_AWAIT_APPROVAL:
		return Answer{State: StateAwaitingApproval, Execution: x, Why: res.Reason}
	case pb.Recovery_RECOVERY_WAIT:
		return d.Wait(ctx, x, res.Reason)
	case pb.Recovery_RECOVERY_QUERY_STATUS:
		return d.queryStatus(ctx, t, in, x, depth)
	case pb.Recovery_RECOVERY_NEEDS_REVIEW:
		return Answer{State: StateNeedsReview, Execution: x, Why: res.Reason}
	case pb.Recovery_RECOVERY_RETURN_RESULT:
		return Answer{State: StateCompleted, Execution: x, Why: "returned the stored result of " + x.GetExecutionId() + "; nothing was sent"}
	case pb.Recovery_RECOVERY_RETURN_DENIAL:
		return Answer{State: StateDenied, Execution: x, Why: res.Reason + ": " + x.GetReason()}
	}
	return Answer{State: StateName(x.GetState()), Execution: x, Why: res.Reason}
}

// StateName is the agent-facing word for a ledger state.
func StateName(s pb.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

// dispatch wins DISPATCHED (or learns who did), sends, records what it
// observed, and answers. The send runs to its own deadline: a caller that
// goes away does not cancel it, and its retry collects the result.
func (d *Driver) dispatch(ctx context.Context, t config.Tool, x *pb.Execution, args []byte) Answer {
	id := x.GetExecutionId()
	e, ok := d.executors[t.Channel]
	if !ok {
		return Answer{Refused: true, Execution: x, Why: "no executor for channel " + strconv.Quote(t.Channel) + "; nothing was sent"}
	}
	// TODO(lead): pass a dispatch token (ledger.Change.DispatchToken, one
	// per attempt of this driver) once the ledger has it, so a
	// MarkDispatched that timed out can learn whether it won.
	if _, err := d.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_DISPATCHED}); err != nil {
		var ite *ledger.IllegalTransitionError
		if errors.As(err, &ite) {
			return d.Wait(ctx, x, "another call dispatched it first; nothing was resent")
		}
		return Answer{Refused: true, Execution: x, Why: "not dispatched: " + err.Error()}
	}
	done := make(chan *pb.Execution, 1)
	go func() { done <- d.record(id, e.Send(t, id, args)) }()
	select {
	case rx := <-done:
		if rx == nil {
			return d.Wait(ctx, x, "the observation could not be recorded")
		}
		switch rx.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED:
			return Answer{State: StateCompleted, Execution: rx}
		case pb.State_STATE_NOT_SENT:
			return Answer{State: StateNotSent, Execution: rx, Why: rx.GetReason() + "; a retry resumes this execution"}
		default:
			return Answer{State: StateOutcomeUnknown, Execution: rx, Why: rx.GetReason() + "; nothing was resent"}
		}
	case <-ctx.Done():
		return Answer{Refused: true, Execution: x, Why: "the caller went away: " + ctx.Err().Error()}
	}
}

// record appends what an attempt observed, detached from the caller.
func (d *Driver) record(id string, o executor.Outcome) *pb.Execution {
	ctx, cancel := context.WithTimeout(context.Background(), recordMax)
	defer cancel()
	ch := ledger.Change{ExecutionID: id}
	switch o.Observed {
	case executor.Answered:
		ch.Event = pb.EventType_EVENT_TYPE_RESULT_OBSERVED
		ch.Apply = func(x *pb.Execution) {
			x.TargetStatus, x.ResultBody, x.ResultContentType = int32(o.Status), o.Body, o.ContentType
			x.ResultReference = "result_" + id[len("act_"):]
		}
	case executor.NotSent:
		ch.Event = pb.EventType_EVENT_TYPE_NOT_SENT
		ch.Apply = func(x *pb.Execution) { x.Reason = o.Reason }
	default:
		ch.Event = pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN
		ch.Apply = func(x *pb.Execution) { x.Reason = o.Reason }
	}
	x, err := d.ledger.Transition(ctx, ch)
	if err != nil {
		d.log.Error("record observation", "execution", id, "err", err)
		return nil
	}
	return x
}

// dispatchDeadline is when the execution's dispatch is due to have
// answered (zero when the ledger records none).
//
// TODO(lead): when the ledger grows Execution.dispatch_deadline, this is
// `if ts := x.GetDispatchDeadline(); ts != nil { return ts.AsTime() }`.
func dispatchDeadline(x *pb.Execution) time.Time {
	_ = x
	return time.Time{}
}

// InFlightWhy says honestly how long the first call may still be at the
// target.
func InFlightWhy(x *pb.Execution) string {
	if dl := dispatchDeadline(x); !dl.IsZero() {
		return "the first call is in flight until " + dl.UTC().Format(time.RFC3339) + "; nothing was resent; ask again after that"
	}
	return "the first call is in flight; nothing was resent; ask again later"
}

// Wait follows an in-flight execution until it leaves DISPATCHED, WaitMax
// at most (or the dispatch deadline, when that is sooner).
func (d *Driver) Wait(ctx context.Context, x *pb.Execution, why string) Answer {
	until := d.now().Add(d.waitMax)
	for d.now().Before(until) {
		cur, err := d.ledger.Get(ctx, x.GetExecutionId())
		if err != nil {
			return Answer{Refused: true, Execution: x, Why: "the execution could not be read: " + err.Error()}
		}
		x = cur
		switch cur.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
			return Answer{State: StateCompleted, Execution: cur, Why: "attached to " + cur.GetExecutionId() + "; " + why}
		case pb.State_STATE_OUTCOME_UNKNOWN:
			return Answer{State: StateOutcomeUnknown, Execution: cur, Why: cur.GetReason() + "; nothing was resent"}
		case pb.State_STATE_DISPATCHED, pb.State_STATE_ACCEPTED, pb.State_STATE_AUTHORIZED:
		default:
			return Answer{State: StateName(cur.GetState()), Execution: cur, Why: why}
		}
		if dl := dispatchDeadline(cur); !dl.IsZero() && d.now().After(dl) {
			break // the deadline sweep records OUTCOME_UNKNOWN; a retry then gets the recovery
		}
		select {
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return Answer{Refused: true, Execution: x, Why: "the caller went away: " + ctx.Err().Error()}
		}
	}
	return Answer{State: StateInFlight, Execution: x, Why: InFlightWhy(x)}
}

// queryStatus asks the target about an unknown outcome and resolves it; a
// proven absence lets the same call run again (NOT_EXECUTED, then RESUME).
func (d *Driver) queryStatus(ctx context.Context, t config.Tool, in ledger.BeginInput, x *pb.Execution, depth int) Answer {
	id := x.GetExecutionId()
	e, ok := d.executors[t.Channel]
	if !ok {
		return Answer{State: StateOutcomeUnknown, Execution: x, Why: "no executor for channel " + strconv.Quote(t.Channel) + "; nothing was resent"}
	}
	st := e.Status(ctx, t, id)
	switch {
	case st.Finding == Running:
		return Answer{State: StateInFlight, Execution: x, Why: st.Evidence + "; nothing was resent"}
	case st.Finding == Done:
		return d.resolveCompleted(ctx, x, st.Code, st.Body, st.Evidence)
	case st.Finding == Absent && depth < maxResolveDepth:
		// TODO(lead): a status query's "not found" proves absence only once
		// the dispatch deadline has passed; check dispatchDeadline(x) here
		// when the ledger records it.
		if _, err := d.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED,
			Evidence: st.Evidence}); err != nil {
			return d.Wait(ctx, x, "resolved by another call")
		}
		res, err := d.Begin(ctx, in)
		if err != nil {
			return Answer{Refused: true, Why: "refused: " + err.Error() + "; nothing was sent"}
		}
		return d.act(ctx, t, in, res, depth+1)
	}
	return Answer{State: StateOutcomeUnknown, Execution: x, Why: st.Evidence + "; nothing was resent"}
}

// resolveCompleted settles an unknown outcome as completed with the
// evidence found, and returns the result.
func (d *Driver) resolveCompleted(ctx context.Context, x *pb.Execution, status int, body, evidence string) Answer {
	id := x.GetExecutionId()
	rx, err := d.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED,
		Evidence: evidence,
		Apply: func(x *pb.Execution) {
			x.TargetStatus, x.ResultBody = int32(status), body
			x.ResultReference = "result_" + id[len("act_"):]
		}})
	if err != nil {
		return d.Wait(ctx, x, "resolved by another call")
	}
	return Answer{State: StateCompleted, Execution: rx, Why: evidence + "; the first call took effect; nothing was resent"}
}

func itoa(n int) string { return fmt.Sprint(n) }
