package ledger

import (
	"fmt"
	"strings"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// rule is one row of the transition table: the event may be appended when
// the execution is in one of from, and moves it to to. keep means the event
// leaves the state as it is (attach).
type rule struct {
	from []pb.State
	to   pb.State
	keep bool
}

// attachable are the states in which a prior execution found by its
// fingerprint absorbs a retry (docs/design.md §2, matching). After DELIVERED or
// NOT_EXECUTED the same action without an operation key is a new execution.
var attachable = []pb.State{
	pb.State_STATE_ACCEPTED, pb.State_STATE_AWAITING_APPROVAL, pb.State_STATE_AUTHORIZED,
	pb.State_STATE_NOT_SENT, pb.State_STATE_DISPATCHED, pb.State_STATE_OUTCOME_UNKNOWN,
	pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DENIED,
}

// keyAttachable are the states in which a prior execution found by its
// operation key absorbs a retry: every state. One key is one operation for
// as long as the contract's key retention keeps it.
var keyAttachable = append(append([]pb.State(nil), attachable...), pb.State_STATE_DELIVERED, pb.State_STATE_NOT_EXECUTED)

// transitions is the lifecycle of docs/design.md §2 as a table. Dispatch from
// ACCEPTED is allowed because ACCEPTED (as opposed to AWAITING_APPROVAL)
// means the session authorization covers the tool; dispatch from
// NOT_EXECUTED resumes an execution whose absence at the target was proven
// (same execution id, so the same Idempotency-Key).
var transitions = map[pb.EventType]rule{
	pb.EventType_EVENT_TYPE_AUTHORIZED: {
		from: []pb.State{pb.State_STATE_ACCEPTED, pb.State_STATE_AWAITING_APPROVAL},
		to:   pb.State_STATE_AUTHORIZED,
	},
	pb.EventType_EVENT_TYPE_DENIED: {
		from: []pb.State{pb.State_STATE_ACCEPTED, pb.State_STATE_AWAITING_APPROVAL, pb.State_STATE_AUTHORIZED, pb.State_STATE_NOT_SENT},
		to:   pb.State_STATE_DENIED,
	},
	pb.EventType_EVENT_TYPE_DISPATCHED: {
		from: []pb.State{pb.State_STATE_ACCEPTED, pb.State_STATE_AUTHORIZED, pb.State_STATE_NOT_SENT, pb.State_STATE_NOT_EXECUTED},
		to:   pb.State_STATE_DISPATCHED,
	},
	pb.EventType_EVENT_TYPE_NOT_SENT: {
		from: []pb.State{pb.State_STATE_DISPATCHED},
		to:   pb.State_STATE_NOT_SENT,
	},
	// An unknown outcome is left only by a resolution (status, marker or a
	// person) or, for idempotency_key tools, by dispatching again.
	pb.EventType_EVENT_TYPE_RESULT_OBSERVED: {
		from: []pb.State{pb.State_STATE_DISPATCHED},
		to:   pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED,
	},
	pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN: {
		from: []pb.State{pb.State_STATE_DISPATCHED},
		to:   pb.State_STATE_OUTCOME_UNKNOWN,
	},
	pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED: {
		from: []pb.State{pb.State_STATE_OUTCOME_UNKNOWN},
		to:   pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED,
	},
	pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED: {
		from: []pb.State{pb.State_STATE_OUTCOME_UNKNOWN},
		to:   pb.State_STATE_NOT_EXECUTED,
	},
	pb.EventType_EVENT_TYPE_DELIVERED: {
		from: []pb.State{pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED},
		to:   pb.State_STATE_DELIVERED,
	},
	pb.EventType_EVENT_TYPE_ATTACHED: {
		from: keyAttachable,
		keep: true,
	},
}

// Transition returns the state an execution in from enters when event t is
// appended, or an *IllegalTransitionError. The retry class matters once: an
// idempotency_key execution whose outcome is unknown may be dispatched again
// (resent with the same Idempotency-Key).
func Transition(from pb.State, t pb.EventType, class contract.RetryClass) (pb.State, error) {
	if t == pb.EventType_EVENT_TYPE_DISPATCHED && from == pb.State_STATE_OUTCOME_UNKNOWN && class == contract.IdempotencyKey {
		return pb.State_STATE_DISPATCHED, nil
	}
	r, ok := transitions[t]
	if !ok {
		return from, &IllegalTransitionError{Event: t, State: from}
	}
	for _, s := range r.from {
		if s == from {
			if r.keep {
				return from, nil
			}
			return r.to, nil
		}
	}
	return from, &IllegalTransitionError{Event: t, State: from, Want: allowedFrom(t, class)}
}

// allowedFrom lists the states event t may be appended in, for error messages.
func allowedFrom(t pb.EventType, class contract.RetryClass) []pb.State {
	want := append([]pb.State(nil), transitions[t].from...)
	if t == pb.EventType_EVENT_TYPE_DISPATCHED && class == contract.IdempotencyKey {
		want = append(want, pb.State_STATE_OUTCOME_UNKNOWN)
	}
	return want
}

// StartsExecution reports whether an event of type t is an execution's
// first event: ACCEPTED, or ACCEPTED_DISPATCHED (accepted and dispatched
// in one decision). Readers that look for "the call that created an
// execution" must ask this, not compare with ACCEPTED.
func StartsExecution(t pb.EventType) bool {
	return t == pb.EventType_EVENT_TYPE_ACCEPTED || t == pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED
}

// Dispatches reports whether an event of type t records a dispatch:
// DISPATCHED, or ACCEPTED_DISPATCHED (which is both transitions).
func Dispatches(t pb.EventType) bool {
	return t == pb.EventType_EVENT_TYPE_DISPATCHED || t == pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED
}

// Attachable reports whether an execution in state s absorbs a retry
// matched by fingerprint (a retry matched by operation key attaches in
// every state).
func Attachable(s pb.State) bool {
	for _, a := range attachable {
		if a == s {
			return true
		}
	}
	return false
}

// Final reports whether no event can move an execution in state s to
// another state any more (a retry may still attach to it).
// NOT_EXECUTED is not final: the same execution may be dispatched again.
func Final(s pb.State) bool {
	return s == pb.State_STATE_DELIVERED
}

// IllegalTransitionError says that an event does not fit the execution's
// current state. When two callers contest a transition, the loser gets this
// error naming the state the winner left behind.
type IllegalTransitionError struct {
	ExecutionID string
	Event       pb.EventType
	State       pb.State
	Want        []pb.State
}

func (e *IllegalTransitionError) Error() string {
	op := strings.TrimPrefix(e.Event.String(), "EVENT_TYPE_")
	id := e.ExecutionID
	if id == "" {
		id = "execution"
	}
	if len(e.Want) == 0 {
		return fmt.Sprintf("illegal transition: %s is in %s; %s never applies", id, e.State, op)
	}
	want := make([]string, len(e.Want))
	for i, s := range e.Want {
		want[i] = s.String()
	}
	return fmt.Sprintf("illegal transition: %s is in %s; %s needs %s", id, e.State, op, strings.Join(want, " or "))
}
