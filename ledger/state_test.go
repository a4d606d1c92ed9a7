package ledger

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Short names for the lifecycle states, so the tables below read like
// docs/design.md §2.
const (
	sAccepted  = pb.State_STATE_ACCEPTED
	sAwaiting  = pb.State_STATE_AWAITING_APPROVAL
	sAuthd     = pb.State_STATE_AUTHORIZED
	sDenied    = pb.State_STATE_DENIED
	sNotSent   = pb.State_STATE_NOT_SENT
	sDisp      = pb.State_STATE_DISPATCHED
	sUnknown   = pb.State_STATE_OUTCOME_UNKNOWN
	sCompleted = pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED
	sDelivered = pb.State_STATE_DELIVERED
	sNotExec   = pb.State_STATE_NOT_EXECUTED
)

// allStates is every lifecycle state (UNSPECIFIED is not one).
var allStates = []pb.State{
	sAccepted, sAwaiting, sAuthd, sDenied, sNotSent, sDisp, sUnknown, sCompleted, sDelivered, sNotExec,
}

// anyClass marks a legal transition that holds for every retry class.
const anyClass contract.RetryClass = "*"

type edge struct {
	from  pb.State
	event pb.EventType
}

type legalRule struct {
	to    pb.State
	class contract.RetryClass // anyClass, or the only class the edge is legal for
}

// legalTransitions is docs/design.md §2's lifecycle written out by hand: every
// (state, event) pair not listed here is illegal for every retry class.
// ATTACHED (to == from) keeps the state and appears once per attachable state.
var legalTransitions = map[edge]legalRule{
	// Authorization: a per-use execution waits in AWAITING_APPROVAL; a
	// session-authorized one starts in ACCEPTED and may be authorized
	// explicitly (the gateway's Authorize defaults to by="session").
	{sAccepted, pb.EventType_EVENT_TYPE_AUTHORIZED}: {sAuthd, anyClass},
	{sAwaiting, pb.EventType_EVENT_TYPE_AUTHORIZED}: {sAuthd, anyClass},

	// Denial before anything left the process. The diagram draws DENIED from
	// ACCEPTED and AWAITING_APPROVAL; denial of an authorized or not-sent
	// (never dispatched in effect) execution is the code's extension,
	// recorded here as intended.
	{sAccepted, pb.EventType_EVENT_TYPE_DENIED}: {sDenied, anyClass},
	{sAwaiting, pb.EventType_EVENT_TYPE_DENIED}: {sDenied, anyClass},
	{sAuthd, pb.EventType_EVENT_TYPE_DENIED}:    {sDenied, anyClass},
	{sNotSent, pb.EventType_EVENT_TYPE_DENIED}:  {sDenied, anyClass},

	// Dispatch: ACCEPTED means the session authorization covers the tool;
	// NOT_SENT "may be resumed"; OUTCOME_UNKNOWN only when the target honours
	// Idempotency-Key (RESEND_SAME_KEY). AWAITING_APPROVAL never dispatches.
	{sAccepted, pb.EventType_EVENT_TYPE_DISPATCHED}: {sDisp, anyClass},
	{sAuthd, pb.EventType_EVENT_TYPE_DISPATCHED}:    {sDisp, anyClass},
	{sNotSent, pb.EventType_EVENT_TYPE_DISPATCHED}:  {sDisp, anyClass},
	// NOT_EXECUTED (absence proven) resumes the same execution when its
	// operation key is retried: same id, same Idempotency-Key.
	{sNotExec, pb.EventType_EVENT_TYPE_DISPATCHED}: {sDisp, anyClass},
	{sUnknown, pb.EventType_EVENT_TYPE_DISPATCHED}: {sDisp, contract.IdempotencyKey},

	// NOT_SENT: DISPATCHED is appended before any byte goes out, so "no byte
	// left the process" is learned after the dispatch was won.
	{sDisp, pb.EventType_EVENT_TYPE_NOT_SENT}: {sNotSent, anyClass},

	// Results and unknown outcomes.
	{sDisp, pb.EventType_EVENT_TYPE_RESULT_OBSERVED}:          {sCompleted, anyClass},
	{sDisp, pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN}:          {sUnknown, anyClass},
	{sUnknown, pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED}:    {sCompleted, anyClass},
	{sUnknown, pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED}: {sNotExec, anyClass},

	// Result observed and result delivered are separate states.
	{sCompleted, pb.EventType_EVENT_TYPE_DELIVERED}: {sDelivered, anyClass},

	// Attach keeps the state, in every state: a fingerprint attaches only
	// in Attachable states, an operation key in any (DELIVERED returns the
	// stored result, NOT_EXECUTED resumes).
	{sDelivered, pb.EventType_EVENT_TYPE_ATTACHED}: {sDelivered, anyClass},
	{sNotExec, pb.EventType_EVENT_TYPE_ATTACHED}:   {sNotExec, anyClass},
	{sAccepted, pb.EventType_EVENT_TYPE_ATTACHED}:  {sAccepted, anyClass},
	{sAwaiting, pb.EventType_EVENT_TYPE_ATTACHED}:  {sAwaiting, anyClass},
	{sAuthd, pb.EventType_EVENT_TYPE_ATTACHED}:     {sAuthd, anyClass},
	{sNotSent, pb.EventType_EVENT_TYPE_ATTACHED}:   {sNotSent, anyClass},
	{sDisp, pb.EventType_EVENT_TYPE_ATTACHED}:      {sDisp, anyClass},
	{sUnknown, pb.EventType_EVENT_TYPE_ATTACHED}:   {sUnknown, anyClass},
	{sCompleted, pb.EventType_EVENT_TYPE_ATTACHED}: {sCompleted, anyClass},
	{sDenied, pb.EventType_EVENT_TYPE_ATTACHED}:    {sDenied, anyClass},
}

// transitionEvents is every event type Transition is asked about: all of
// them except INTENT_CLAIMED (not an execution event) and ACCEPTED (starts an
// execution, never moves one). UNSPECIFIED is included: it is never legal;
// so is ACCEPTED_DISPATCHED, which also only starts an execution (it has no
// rows in legalTransitions).
func transitionEvents(t *testing.T) []pb.EventType {
	t.Helper()
	var out []pb.EventType
	for n := range pb.EventType_name {
		e := pb.EventType(n)
		if e == pb.EventType_EVENT_TYPE_ACCEPTED || e >= pb.EventType_EVENT_TYPE_BUDGET_LIMIT_SET {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) != 12 {
		t.Fatalf("expected 12 event types under test, got %d: %v (a new event type needs rows in legalTransitions)", len(out), out)
	}
	return out
}

func TestAllStatesCoversEnum(t *testing.T) {
	if got, want := len(allStates), len(pb.State_name)-1; got != want {
		t.Fatalf("allStates has %d states, the enum has %d besides UNSPECIFIED", got, want)
	}
}

func TestTransitionTable(t *testing.T) {
	events := transitionEvents(t)
	cases, legal := 0, 0
	for _, from := range allStates {
		for _, ev := range events {
			for _, class := range contract.RetryClasses {
				cases++
				rule, ok := legalTransitions[edge{from, ev}]
				wantLegal := ok && (rule.class == anyClass || rule.class == class)
				name := from.String() + "/" + ev.String() + "/" + string(class)
				got, err := Transition(from, ev, class)
				if wantLegal {
					legal++
					if err != nil {
						t.Errorf("%s: want legal -> %s, got error %v", name, rule.to, err)
						continue
					}
					if got != rule.to {
						t.Errorf("%s: next state %s, want %s", name, got, rule.to)
					}
					continue
				}
				if err == nil {
					t.Errorf("%s: want illegal, got legal -> %s", name, got)
					continue
				}
				var ite *IllegalTransitionError
				if !errors.As(err, &ite) {
					t.Errorf("%s: error %T (%v) is not *IllegalTransitionError", name, err, err)
					continue
				}
				if ite.State != from || ite.Event != ev {
					t.Errorf("%s: error names state %s event %s", name, ite.State, ite.Event)
				}
				if msg := err.Error(); !strings.Contains(msg, from.String()) {
					t.Errorf("%s: error %q does not name the current state %s", name, msg, from)
				}
			}
		}
	}
	if cases != 480 {
		t.Fatalf("ran %d cases, want 10 states x 12 events x 4 classes = 480", cases)
	}
	// 26 edges for every class (4 each) plus OUTCOME_UNKNOWN->DISPATCHED for
	// idempotency_key only.
	if legal != 26*4+1 {
		t.Fatalf("%d legal cases, want %d", legal, 26*4+1)
	}
}

// The notable rules of docs/design.md §2, spelled out so a failure reads as the
// rule that broke.
func TestTransitionNotableRules(t *testing.T) {
	for _, class := range contract.RetryClasses {
		if to, err := Transition(sAccepted, pb.EventType_EVENT_TYPE_DISPATCHED, class); err != nil || to != sDisp {
			t.Errorf("%s: ACCEPTED->DISPATCHED (session authorization) = %s, %v", class, to, err)
		}
		if _, err := Transition(sAwaiting, pb.EventType_EVENT_TYPE_DISPATCHED, class); err == nil {
			t.Errorf("%s: AWAITING_APPROVAL->DISPATCHED must be illegal", class)
		}
		_, err := Transition(sUnknown, pb.EventType_EVENT_TYPE_DISPATCHED, class)
		if (err == nil) != (class == contract.IdempotencyKey) {
			t.Errorf("%s: OUTCOME_UNKNOWN->DISPATCHED err=%v; legal only for idempotency_key", class, err)
		}
		// DELIVERED is final: only an attach (which keeps it) applies.
		for _, ev := range transitionEvents(t) {
			to, err := Transition(sDelivered, ev, class)
			if (err == nil) != (ev == pb.EventType_EVENT_TYPE_ATTACHED) || (err == nil && to != sDelivered) {
				t.Errorf("%s: final DELIVERED with %s -> %s, %v", class, ev, to, err)
			}
		}
		// NOT_EXECUTED resumes: DISPATCHED again, same execution.
		if to, err := Transition(sNotExec, pb.EventType_EVENT_TYPE_DISPATCHED, class); err != nil || to != sDisp {
			t.Errorf("%s: NOT_EXECUTED->DISPATCHED (resume) = %s, %v", class, to, err)
		}
	}
}

func TestIllegalTransitionErrorMessage(t *testing.T) {
	_, err := Transition(sDisp, pb.EventType_EVENT_TYPE_DISPATCHED, contract.Irreversible)
	if err == nil {
		t.Fatal("second DISPATCHED must lose")
	}
	msg := err.Error()
	for _, want := range []string{"STATE_DISPATCHED", "DISPATCHED needs", "STATE_AUTHORIZED"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "STATE_OUTCOME_UNKNOWN") {
		t.Errorf("error %q offers OUTCOME_UNKNOWN to an irreversible execution", msg)
	}

	e := &IllegalTransitionError{ExecutionID: "exe_1", Event: pb.EventType_EVENT_TYPE_DELIVERED, State: sDelivered}
	if msg := e.Error(); !strings.Contains(msg, "exe_1") || !strings.Contains(msg, "STATE_DELIVERED") {
		t.Errorf("error %q must name the execution and its state", msg)
	}
}

func TestAttachable(t *testing.T) {
	want := map[pb.State]bool{
		sAccepted: true, sAwaiting: true, sAuthd: true, sNotSent: true, sDisp: true,
		sUnknown: true, sCompleted: true, sDenied: true,
		sDelivered: false, sNotExec: false, pb.State_STATE_UNSPECIFIED: false,
	}
	for s, w := range want {
		if got := Attachable(s); got != w {
			t.Errorf("Attachable(%s) = %v, want %v", s, got, w)
		}
	}
}

func TestFinal(t *testing.T) {
	for _, s := range append(allStates, pb.State_STATE_UNSPECIFIED) {
		want := s == sDelivered
		if got := Final(s); got != want {
			t.Errorf("Final(%s) = %v, want %v", s, got, want)
		}
		if want && Attachable(s) {
			t.Errorf("%s is both final and attachable", s)
		}
	}
}

// Budget events live on accounts' subjects: none ever moves an execution.
func TestBudgetEventsNeverMoveAnExecution(t *testing.T) {
	for n := range pb.EventType_name {
		e := pb.EventType(n)
		if e < pb.EventType_EVENT_TYPE_BUDGET_LIMIT_SET {
			continue
		}
		for s := range pb.State_name {
			if _, err := Transition(pb.State(s), e, contract.IdempotencyKey); err == nil {
				t.Fatalf("%v moved an execution in %v", e, pb.State(s))
			}
		}
	}
}
