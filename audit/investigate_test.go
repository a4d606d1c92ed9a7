package audit

import (
	"strings"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// history builds the stored events of one execution: each step is an
// event type and the state (and reason) the record has after it.
type step struct {
	typ     pb.EventType
	state   pb.State
	reason  string
	session string
}

func history(id string, seq uint64, steps ...step) []Stored {
	var out []Stored
	for i, s := range steps {
		x := &pb.Execution{ExecutionId: id, State: s.state, Reason: s.reason, Actor: "agent-7", TargetStatus: 201, ResultReference: "result_" + id}
		ev := &pb.Event{EventId: "evt_" + id + string(rune('a'+i)), Type: s.typ, ExecutionId: id, Subject: "pc.exec.f1." + id, GatewayId: "gw-a",
			Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Correlation: &pb.Correlation{SessionId: s.session, JsonrpcId: "1"}}}}
		out = append(out, Stored{Seq: seq + uint64(i), Event: ev})
	}
	return out
}

var (
	accepted   = step{typ: pb.EventType_EVENT_TYPE_ACCEPTED, state: pb.State_STATE_ACCEPTED, session: "s-1"}
	dispatched = step{typ: pb.EventType_EVENT_TYPE_DISPATCHED, state: pb.State_STATE_DISPATCHED}
	observed   = step{typ: pb.EventType_EVENT_TYPE_RESULT_OBSERVED, state: pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED}
)

// withoutCorrelation drops the events' correlations, as a Connect caller
// that names none leaves them.
func withoutCorrelation(evs []Stored) []Stored {
	for _, s := range evs {
		s.Event.GetExecutionChanged().Correlation = nil
	}
	return evs
}

// The investigation's "no" answers, each from the events that prove it.
func TestInvestigateNoAnswers(t *testing.T) {
	const id = "act_01M8MFY3Q2ABCDEFGHJKMNPQRS"
	for name, tc := range map[string]struct {
		events []Stored
		want   [5]string // prefixes; "" = not checked
	}{
		"denied": {history(id, 1, accepted, step{typ: pb.EventType_EVENT_TYPE_DENIED, state: pb.State_STATE_DENIED, reason: "budget exceeded"}),
			[5]string{"one:", "no: it was denied (budget exceeded)", "no: nothing was sent yet", "not applicable", "no second call was recorded"}},
		"awaiting approval": {history(id, 1, step{typ: pb.EventType_EVENT_TYPE_ACCEPTED, state: pb.State_STATE_AWAITING_APPROVAL, session: "s-1"}),
			[5]string{"", "no: it waits for approval", "no: nothing was sent yet", "not applicable", ""}},
		"never dispatched": {history(id, 1, accepted),
			[5]string{"", "no: it never reached dispatch", "no: nothing was sent yet", "", ""}},
		"outcome unknown": {history(id, 1, accepted, dispatched, step{typ: pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, state: pb.State_STATE_OUTCOME_UNKNOWN, reason: "no answer within 300ms"}),
			[5]string{"", "yes: it was dispatched", "no: the outcome is unknown (no answer within 300ms)", "not applicable", ""}},
		"not sent": {history(id, 1, accepted, dispatched, step{typ: pb.EventType_EVENT_TYPE_NOT_SENT, state: pb.State_STATE_NOT_SENT, reason: "connection refused"}),
			[5]string{"", "yes", "no: nothing reached the target (not_sent)", "not applicable", ""}},
		"delivered": {history(id, 1, accepted, dispatched, observed, step{typ: pb.EventType_EVENT_TYPE_DELIVERED, state: pb.State_STATE_DELIVERED}),
			[5]string{"one:", "yes", "yes: the target answered 201", "no: the result was delivered", "no second call was recorded"}},
		"accepted and dispatched in one event, resent after an unknown outcome": {history(id, 1,
			step{typ: pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED, state: pb.State_STATE_DISPATCHED, session: "s-1"},
			step{typ: pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, state: pb.State_STATE_OUTCOME_UNKNOWN, reason: "dispatch deadline passed"},
			step{typ: pb.EventType_EVENT_TYPE_ATTACHED, state: pb.State_STATE_OUTCOME_UNKNOWN, session: "s-1"},
			dispatched, observed),
			[5]string{"one:", "yes: it was dispatched under the session's authorization", "yes: the target answered 201", "", "reused: 1 later call(s) attached to " + id + " (Idempotency-Key " + id + "); it was resent 1 time(s) with the same key"}},
		"two sessions, a new attempt": {append(history(id, 1, accepted, dispatched, observed),
			history("act_01M8MFY3Q2ABCDEFGHJKMNPQRT", 10, step{typ: pb.EventType_EVENT_TYPE_ACCEPTED, state: pb.State_STATE_ACCEPTED, session: "s-2"})...),
			[5]string{"2 agent sessions", "", "", "yes: the target completed", "new attempt(s): act_01M8MFY3Q2ABCDEFGHJKMNPQRT (act_01M8MFY3Q2ABCDEFGHJKMNPQRT: it came outside the match window)"}},
		"a keyless call after delivery": {append(history(id, 1, accepted, dispatched, observed, step{typ: pb.EventType_EVENT_TYPE_DELIVERED, state: pb.State_STATE_DELIVERED}),
			history("act_01M8MFY3Q2ABCDEFGHJKMNPQRT", 10, step{typ: pb.EventType_EVENT_TYPE_ACCEPTED, state: pb.State_STATE_ACCEPTED, session: "s-1"})...),
			[5]string{"", "", "", "no: the result was delivered", "new attempt(s): act_01M8MFY3Q2ABCDEFGHJKMNPQRT (act_01M8MFY3Q2ABCDEFGHJKMNPQRT: this execution's result had been delivered when it came"}},
		"a retry of a pending approval: reused, never sent": {history(id, 1,
			step{typ: pb.EventType_EVENT_TYPE_ACCEPTED, state: pb.State_STATE_AWAITING_APPROVAL, session: "s-1"},
			step{typ: pb.EventType_EVENT_TYPE_ATTACHED, state: pb.State_STATE_AWAITING_APPROVAL, session: "s-1"}),
			[5]string{"one:", "no: it waits for approval", "", "", "reused: 1 later call(s) attached to " + id + "; it was never sent, so no Idempotency-Key reached a target"}},
		"Connect calls without a correlation": {withoutCorrelation(history(id, 1, accepted, step{typ: pb.EventType_EVENT_TYPE_ATTACHED, state: pb.State_STATE_ACCEPTED})),
			[5]string{"unknown: 2 call(s) carried no session", "", "", "", ""}},
	} {
		inv := Investigate(id, tc.events)
		if len(inv.Answers) != 5 {
			t.Fatalf("%s: %d answers", name, len(inv.Answers))
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(inv.Answers[i].Answer, w) {
				t.Errorf("%s: answer %d is %q, want %q…", name, i+1, inv.Answers[i].Answer, w)
			}
		}
	}
}

// A person's decision in the timeline names the person: who approved, who
// denied (a denial's reason from the ApprovalService already does).
func TestTimelineNamesWhoDecided(t *testing.T) {
	for _, tc := range []struct {
		ev     pb.EventType
		x      *pb.Execution
		detail string
	}{
		{pb.EventType_EVENT_TYPE_AUTHORIZED, &pb.Execution{AuthorizedBy: "alice"}, "by alice"},
		{pb.EventType_EVENT_TYPE_DENIED, &pb.Execution{AuthorizedBy: "bob", Reason: "freeze"}, "by bob: freeze"},
		{pb.EventType_EVENT_TYPE_DENIED, &pb.Execution{AuthorizedBy: "bob", Reason: "denied by bob: freeze"}, "denied by bob: freeze"},
	} {
		if got := detail(&pb.Event{Type: tc.ev}, tc.x); got != tc.detail {
			t.Errorf("%s: %q, want %q", tc.ev, got, tc.detail)
		}
	}
}
