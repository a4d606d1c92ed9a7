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

	"github.com/oklog/ulid/v2"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/executor"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Limits of the driver.
const (
	// WaitMax bounds how long an attached call follows an in-flight
	// execution before it answers "in flight".
	WaitMax        = 20 * time.Second
	pollEvery      = 50 * time.Millisecond
	recordMax      = 30 * time.Second // appending an observation, detached from the caller
	maxDecisions   = 2                // a call is decided again at most twice (absence proven, an unknown outcome met while waiting)
	dispatchAskMax = 3                // asking again whether a DISPATCHED whose answer was lost won
)

// EvidenceLateResult is the evidence of a result that arrived after the
// deadline sweep had recorded OUTCOME_UNKNOWN.
const EvidenceLateResult = "the target answered after the dispatch deadline"

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

// New returns a driver over l with the http and ssh executors, on the
// ledger's clock (deadlines are compared on it); front
// doors add channels of their own (an upstream MCP server) with Handle.
func New(l *ledger.Service, log *slog.Logger) *Driver {
	return &Driver{ledger: l, log: log, now: l.Now, waitMax: WaitMax, executors: map[string]Executor{
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
// returns. When this driver can send on the call's channel, Begin carries
// a dispatch token of this attempt, so a new execution that needs no
// approval and holds no budget is accepted and dispatched in one event
// (ACCEPTED_DISPATCHED): Act then sends it without a second append. The
// decision runs detached from the caller (bounded by recordMax): once the
// event may land, only its answer tells whether this call must send.
func (d *Driver) Begin(ctx context.Context, in ledger.BeginInput) (ledger.BeginResult, error) {
	if _, ok := d.executors[in.Action.Channel]; ok && in.DispatchToken == "" {
		in.DispatchToken = newDispatchToken()
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordMax)
	defer cancel()
	return d.ledger.Begin(bctx, in)
}

// newDispatchToken names one dispatch attempt (ledger.Change.DispatchToken).
func newDispatchToken() string { return "dsp_" + ulid.Make().String() }

// dispatchedAtAccept: Begin created this execution already DISPATCHED
// (ACCEPTED_DISPATCHED under the token it sent), so this call won the
// dispatch. Only a new execution can be; an attached call never is.
func dispatchedAtAccept(res ledger.BeginResult) bool {
	return res.Decision == pb.Decision_DECISION_NEW && res.Execution.GetState() == pb.State_STATE_DISPATCHED
}

// Check refuses, before anything is recorded, a call whose arguments the
// tool's executor could never send (Checker): a GET tool's nested
// argument, say. Run checks; a front door that calls Begin itself checks
// first.
func (d *Driver) Check(t config.Tool, in ledger.BeginInput) error {
	if c, ok := d.executors[t.Channel].(Checker); ok {
		if err := c.Check(t, in.Action.Arguments); err != nil {
			return fmt.Errorf("%w: %v", ledger.ErrInvalid, err)
		}
	}
	return nil
}

// Run begins the call and acts on the decision.
func (d *Driver) Run(ctx context.Context, t config.Tool, in ledger.BeginInput) Answer {
	if err := d.Check(t, in); err != nil {
		return Answer{Refused: true, Why: "refused: " + err.Error() + "; nothing was recorded or sent"}
	}
	res, err := d.Begin(ctx, in)
	if err != nil {
		return Answer{Refused: true, Why: "refused: " + err.Error() + "; nothing was sent"}
	}
	return d.Act(ctx, t, in, res)
}

// Act does what the recovery table says for Begin's decision.
func (d *Driver) Act(ctx context.Context, t config.Tool, in ledger.BeginInput, res ledger.BeginResult) Answer {
	return d.act(ctx, call{tool: t, in: in}, res)
}

// ErrNotAuthorized refuses a Resume of an execution that is no longer
// AUTHORIZED when its dispatch would be appended.
var ErrNotAuthorized = errors.New("the execution is no longer authorized")

// Resume dispatches an execution a person approved (AUTHORIZED) for a
// front door that still holds the call's input but has no new call to
// Begin (a task whose agent polls tasks/get): the RESUME a retry of the
// call would take, without the ATTACHED event of a call nobody made. The
// DISPATCHED compare-and-set decides who sends, and it is taken only from
// AUTHORIZED: a denied or cancelled execution is never sent, and one that
// another call dispatched (or that went on from there, NOT_SENT say) is
// only followed, never sent again from here.
func (d *Driver) Resume(ctx context.Context, t config.Tool, in ledger.BeginInput, x *pb.Execution) Answer {
	if x.GetState() != pb.State_STATE_AUTHORIZED {
		return Answer{State: StateName(x.GetState()), Execution: x, Why: "not resumed: the execution is " + StateName(x.GetState()) + ", not authorized; nothing was sent"}
	}
	why := "resumed " + x.GetExecutionId() + " after its approval"
	if by := x.GetAuthorizedBy(); by != "" {
		why += " by " + by
	}
	return d.dispatch(ctx, call{tool: t, in: in, authorizedOnly: true}, x, false, why)
}

// call is one call the driver acts on: its tool, the input Begin decided
// (decided again when what it waited for changed: an absence proven, an
// unknown outcome), and how often it was decided again (maxDecisions).
type call struct {
	tool      config.Tool
	in        ledger.BeginInput
	decisions int
	// authorizedOnly: this dispatch may be won only from AUTHORIZED
	// (Resume), not from the other states DISPATCHED may follow.
	authorizedOnly bool
}

// decideAgain asks the ledger again and acts on its new decision: the
// recovery table, not this call, says what happens now.
func (d *Driver) decideAgain(ctx context.Context, c call) Answer {
	c.in.DecidedAgain = true // the same call: its attach is not another retry
	res, err := d.Begin(ctx, c.in)
	if err != nil {
		return Answer{Refused: true, Why: "refused: " + err.Error() + "; nothing was sent"}
	}
	c.decisions++
	return d.act(ctx, c, res)
}

func (d *Driver) act(ctx context.Context, c call, res ledger.BeginResult) Answer {
	x := res.Execution
	if res.Decision == pb.Decision_DECISION_NEW {
		switch x.GetState() {
		case pb.State_STATE_AWAITING_APPROVAL:
			return Answer{State: StateAwaitingApproval, Execution: x, Why: "the tool needs a person's approval for every use; nothing was sent"}
		case pb.State_STATE_DENIED:
			return Answer{State: StateDenied, Execution: x, Why: x.GetReason()}
		}
		return d.dispatch(ctx, c, x, dispatchedAtAccept(res), "")
	}
	switch res.Recovery {
	case pb.Recovery_RECOVERY_RESUME, pb.Recovery_RECOVERY_RESEND_SAME_KEY:
		return d.dispatch(ctx, c, x, false, sentAgainWhy(res))
	case pb.Recovery_RECOVERY_AWAIT_APPROVAL:
		return Answer{State: StateAwaitingApproval, Execution: x, Why: res.Reason}
	case pb.Recovery_RECOVERY_WAIT:
		return d.wait(ctx, c, x, "it was in flight")
	case pb.Recovery_RECOVERY_QUERY_STATUS:
		return d.queryStatus(ctx, c, x)
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

// sentAgainWhy says why an attached call sent its execution again, as
// every other attached answer says why it did what it did (the stored
// result, the wait, the review): a resend after an unknown outcome with
// the same Idempotency-Key, or a resume.
func sentAgainWhy(res ledger.BeginResult) string {
	x := res.Execution
	id := x.GetExecutionId()
	if res.Recovery == pb.Recovery_RECOVERY_RESEND_SAME_KEY {
		why := "attached to " + id + ", whose outcome was unknown"
		if r := x.GetReason(); r != "" {
			why += " (" + r + ")"
		}
		switch x.GetChannel() {
		case "ssh":
			return why + "; sent again under the same execution id (" + id + "), whose remote marker refuses a second start, so the command runs at most once"
		case "mcp":
			return why + "; resent with the same idempotency key (" + id + ", in _meta io.portcullis/idempotency-key), which the contract says the upstream honours, so it performs the action at most once"
		}
		return why + "; resent with the same Idempotency-Key (" + id + "), which the target honours, so it performs the action at most once"
	}
	why := "attached to " + id + " and resumed it"
	if res.Reason != "" {
		why += ": " + res.Reason
	}
	return why
}

// dispatch wins DISPATCHED (or learns who did), sends, records what it
// observed, and answers. atAccept: the execution was accepted and
// dispatched in one event by this call's Begin, which is the win. again
// (an attached call's resend or resume) says why it was sent again; the
// answer to this call's own send carries it. The send runs to its own
// deadline: a caller that goes away does not cancel it, and its retry
// collects the result.
func (d *Driver) dispatch(ctx context.Context, c call, x *pb.Execution, atAccept bool, again string) Answer {
	id, t, args := x.GetExecutionId(), c.tool, c.in.Action.Arguments
	e, ok := d.executors[t.Channel]
	if !ok {
		return Answer{Refused: true, Execution: x, Why: "no executor for channel " + strconv.Quote(t.Channel) + "; nothing was sent"}
	}
	won, err := d.markDispatched(ctx, id, atAccept, c.authorizedOnly)
	if err != nil {
		return Answer{Refused: true, Execution: x, Why: "not dispatched: " + err.Error()}
	}
	if !won {
		return d.wait(ctx, c, x, "another call dispatched it first")
	}
	// The target's answer may echo a secret argument: redacted before it
	// is recorded (executor.Secrets).
	secrets := executor.SecretsOf(t.Contract.Fingerprint.Secrets, args)
	done := make(chan *pb.Execution, 1)
	go func() { done <- d.record(id, e.Send(t, id, args).Redact(secrets)) }()
	select {
	case rx := <-done:
		if rx == nil {
			return d.wait(ctx, c, x, "the observation could not be recorded")
		}
		switch rx.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED:
			return Answer{State: StateCompleted, Execution: rx, Why: again}
		case pb.State_STATE_NOT_SENT:
			return Answer{State: StateNotSent, Execution: rx, Why: joinWhy(again, rx.GetReason()+"; a retry resumes this execution")}
		default:
			if again != "" {
				return Answer{State: StateOutcomeUnknown, Execution: rx, Why: again + "; then: " + rx.GetReason() + "; nothing more was sent"}
			}
			return Answer{State: StateOutcomeUnknown, Execution: rx, Why: rx.GetReason() + "; nothing was resent"}
		}
	case <-ctx.Done():
		return Answer{Refused: true, Execution: x, Why: "the caller went away: " + ctx.Err().Error()}
	}
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// markDispatched wins DISPATCHED under a token of this attempt; atAccept
// says Begin's ACCEPTED_DISPATCHED already won it (nothing to append).
// When the append's answer was lost (ErrAppendUnknown, a timeout) it asks
// again with the same token, detached from the caller: the ledger answers
// as the winner was if this attempt won, and an illegal transition if
// another call did. won is false (and err nil) when another call
// dispatched first.
func (d *Driver) markDispatched(ctx context.Context, id string, atAccept, authorizedOnly bool) (won bool, err error) {
	if atAccept {
		return true, nil
	}
	ch := ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_DISPATCHED, DispatchToken: newDispatchToken()}
	if authorizedOnly {
		// Checked on the head the compare-and-set is taken on. The
		// winner's own token answers as it did (the ledger checks that
		// before Require), so a lost answer is still learnt.
		ch.Require = func(x *pb.Execution, _ time.Time) error {
			if x.GetState() != pb.State_STATE_AUTHORIZED {
				return fmt.Errorf("%w: %s", ErrNotAuthorized, StateName(x.GetState()))
			}
			return nil
		}
	}
	_, err = d.ledger.Transition(ctx, ch)
	for i := 0; i < dispatchAskMax && answerLost(err); i++ {
		d.log.Warn("dispatch answer lost; asking again with the same token", "execution", id, "err", err)
		actx, cancel := context.WithTimeout(context.Background(), recordMax)
		_, err = d.ledger.Transition(actx, ch)
		cancel()
	}
	var ite *ledger.IllegalTransitionError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ite), errors.Is(err, ErrNotAuthorized):
		return false, nil
	}
	return false, err
}

// answerLost: the append may have landed; only asking again tells.
func answerLost(err error) bool {
	return errors.Is(err, ledger.ErrAppendUnknown) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// record appends what an attempt observed, detached from the caller. A
// result that loses to the deadline sweep (the execution went
// OUTCOME_UNKNOWN first) is not dropped: it resolves the execution as
// completed, with evidence that it came after the deadline.
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
	var ite *ledger.IllegalTransitionError
	if ch.Event == pb.EventType_EVENT_TYPE_RESULT_OBSERVED && errors.As(err, &ite) && ite.State == pb.State_STATE_OUTCOME_UNKNOWN {
		ch.Event, ch.Evidence = pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, EvidenceLateResult
		x, err = d.ledger.Transition(ctx, ch)
	}
	if err != nil {
		d.log.Error("record observation", "execution", id, "err", err)
		return nil
	}
	return x
}

// dispatchDeadline is when the execution's dispatch is due to have
// answered (zero when the ledger records none: not dispatched yet).
func dispatchDeadline(x *pb.Execution) time.Time {
	if ts := x.GetDispatchDeadline(); ts != nil {
		return ts.AsTime()
	}
	return time.Time{}
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// InFlightWhy says honestly how long the first call may still be at the
// target.
func InFlightWhy(x *pb.Execution) string {
	if dl := dispatchDeadline(x); !dl.IsZero() {
		return "the first call is in flight until " + formatTime(dl) + "; nothing was resent; ask again after that"
	}
	return "the first call is in flight; nothing was resent; ask again later"
}

// wait follows an in-flight execution until it leaves DISPATCHED, WaitMax
// at most. An execution whose outcome turned unknown meanwhile (its
// dispatch failed, or its deadline passed: the wait expires it itself,
// exactly once across gateways like the sweep) is decided again, so this
// call gets the class recovery a retry a moment later would get
// (RESEND_SAME_KEY, QUERY_STATUS, NEEDS_REVIEW) instead of being sent
// away to retry. why is what was so when the wait began ("it was in
// flight", "another call dispatched it first"); the answer says it in
// the past, with what the wait found (audit s1: a completed answer said
// "in flight until …").
func (d *Driver) wait(ctx context.Context, c call, x *pb.Execution, why string) Answer {
	until := d.now().Add(d.waitMax)
	for {
		cur, err := d.ledger.Get(ctx, x.GetExecutionId())
		if err != nil {
			return Answer{Refused: true, Execution: x, Why: "the execution could not be read: " + err.Error()}
		}
		x = cur
		if dl := dispatchDeadline(cur); cur.GetState() == pb.State_STATE_DISPATCHED && !dl.IsZero() && d.now().After(dl) {
			// Past the deadline it is not "in flight": record the
			// unknown outcome now.
			ux, _, err := d.ledger.ExpireOverdue(ctx, cur.GetExecutionId())
			if err != nil {
				return Answer{State: StateOutcomeUnknown, Execution: cur, Why: "no result by the dispatch deadline " + formatTime(dl) + "; nothing was resent; a retry gets the recovery"}
			}
			x, cur = ux, ux
		}
		switch cur.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
			return Answer{State: StateCompleted, Execution: cur, Why: "attached to " + cur.GetExecutionId() + "; " + why + "; this call waited for its result, which is returned; nothing was resent"}
		case pb.State_STATE_OUTCOME_UNKNOWN:
			if c.decisions < maxDecisions {
				return d.decideAgain(ctx, c)
			}
			return Answer{State: StateOutcomeUnknown, Execution: cur, Why: cur.GetReason() + "; nothing was resent; a retry gets the recovery"}
		case pb.State_STATE_DISPATCHED, pb.State_STATE_ACCEPTED, pb.State_STATE_AUTHORIZED:
		default:
			then := "then it became " + StateName(cur.GetState())
			if r := cur.GetReason(); r != "" {
				then += " (" + r + ")"
			}
			return Answer{State: StateName(cur.GetState()), Execution: cur, Why: "attached to " + cur.GetExecutionId() + "; " + why + "; " + then + "; nothing was resent"}
		}
		if !d.now().Before(until) {
			return Answer{State: StateInFlight, Execution: x, Why: InFlightWhy(x)}
		}
		select {
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return Answer{Refused: true, Execution: x, Why: "the caller went away: " + ctx.Err().Error()}
		}
	}
}

// queryStatus asks the target about an unknown outcome and resolves it. A
// "not found" proves absence only once the dispatch deadline has passed
// (the target may not yet show a request it is still working on): before
// it the answer is an honest outcome_unknown; after it the execution is
// resolved NOT_EXECUTED and the call is begun again, so the ledger decides
// what runs: an operation key's retry resumes the same execution (same id,
// so the same Idempotency-Key), a fingerprint-only retry gets a new one.
func (d *Driver) queryStatus(ctx context.Context, c call, x *pb.Execution) Answer {
	id, t, in := x.GetExecutionId(), c.tool, c.in
	e, ok := d.executors[t.Channel]
	if !ok {
		return Answer{State: StateOutcomeUnknown, Execution: x, Why: "no executor for channel " + strconv.Quote(t.Channel) + "; nothing was resent"}
	}
	st := e.Status(ctx, t, id)
	if secrets := executor.SecretsOf(t.Contract.Fingerprint.Secrets, in.Action.Arguments); !secrets.Empty() {
		st.Body, st.Evidence = secrets.Redact(st.Body, false), secrets.Redact(st.Evidence, false)
	}
	switch {
	case st.Finding == Running:
		return Answer{State: StateInFlight, Execution: x, Why: st.Evidence + "; nothing was resent"}
	case st.Finding == Done:
		return d.resolveCompleted(ctx, c, x, st.Code, st.Body, st.Evidence)
	case st.Finding == Absent && c.decisions < maxDecisions:
		if dl := dispatchDeadline(x); !dl.IsZero() && d.now().Before(dl) {
			return notProvenYet(x, st.Evidence, formatTime(dl))
		}
		_, err := d.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED,
			Evidence: st.Evidence + " after the dispatch deadline: absence proven"})
		var ite *ledger.IllegalTransitionError
		switch {
		case errors.Is(err, ledger.ErrDeadlineAhead):
			return notProvenYet(x, st.Evidence, formatTime(ledger.DispatchDeadline(x, t.Contract)))
		case err != nil && !errors.As(err, &ite):
			return Answer{State: StateOutcomeUnknown, Execution: x, Why: "the absence could not be recorded: " + err.Error() + "; nothing was resent"}
		}
		// Resolved here, or by another call first: either way the ledger's
		// Begin now decides (resume, attach to the other call's dispatch,
		// or a new execution).
		return d.decideAgain(ctx, c)
	}
	return Answer{State: StateOutcomeUnknown, Execution: x, Why: st.Evidence + "; nothing was resent"}
}

// notProvenYet answers a "not found" that came before the dispatch
// deadline: the outcome stays unknown and nothing is resent. evidence is
// the observation only ("the status endpoint answered 404 …"); whether it
// proves absence is decided here, by the deadline.
func notProvenYet(x *pb.Execution, evidence, deadline string) Answer {
	return Answer{State: StateOutcomeUnknown, Execution: x,
		Why: evidence + ", but before the dispatch deadline that does not prove absence (the target may still be working on it); nothing was resent; ask again after " + deadline}
}

// resolveCompleted settles an unknown outcome as completed with the
// evidence found, and returns the result.
func (d *Driver) resolveCompleted(ctx context.Context, c call, x *pb.Execution, status int, body, evidence string) Answer {
	id := x.GetExecutionId()
	rx, err := d.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED,
		Evidence: evidence,
		Apply: func(x *pb.Execution) {
			x.TargetStatus, x.ResultBody = int32(status), body
			x.ResultReference = "result_" + id[len("act_"):]
		}})
	if err != nil {
		return d.wait(ctx, c, x, "resolved by another call")
	}
	return Answer{State: StateCompleted, Execution: rx, Why: evidence + "; the first call took effect; nothing was resent"}
}

func itoa(n int) string { return fmt.Sprint(n) }
