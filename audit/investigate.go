package audit

import (
	"fmt"
	"sort"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Answer is one of the five questions an incident asks, with its evidence.
type Answer struct {
	Question string   `json:"question"`
	Answer   string   `json:"answer"`
	Evidence []string `json:"evidence"`
}

// Step is one event of the timeline.
type Step struct {
	Time      time.Time `json:"time"`
	Seq       uint64    `json:"seq"`
	Execution string    `json:"execution_id"`
	Event     string    `json:"event"`
	Gateway   string    `json:"gateway"`
	Session   string    `json:"session,omitempty"`
	Request   string    `json:"jsonrpc_id,omitempty"`
	Caller    string    `json:"caller,omitempty"` // the Connect caller that sent the call
	Detail    string    `json:"detail,omitempty"`
}

// Investigation answers, in the order an incident needs them, what
// happened to one execution and its intent.
type Investigation struct {
	ExecutionID string   `json:"execution_id"`
	Answers     []Answer `json:"answers"`
	Timeline    []Step   `json:"timeline"`
	Related     []string `json:"related_executions"`
}

// Stored is one event with its stream sequence.
type Stored struct {
	Seq   uint64
	Event *pb.Event
	// Stream holds Seq ("": the intent's executions stream). Events of one
	// stream keep their sequence order; streams (the shards of a sharded
	// ledger) are merged by event time.
	Stream string
}

// byStreamThenTime orders events: each stream by sequence, the streams
// interleaved by event time (a k-way merge, so the order within a stream
// stands even when gateways' clocks disagree).
func byStreamThenTime(events []Stored) []Stored {
	groups := map[string][]Stored{}
	var names []string
	for _, s := range events {
		if _, ok := groups[s.Stream]; !ok {
			names = append(names, s.Stream)
		}
		groups[s.Stream] = append(groups[s.Stream], s)
	}
	sort.Strings(names)
	for _, g := range groups {
		sort.Slice(g, func(i, j int) bool { return g[i].Seq < g[j].Seq })
	}
	out := make([]Stored, 0, len(events))
	for len(out) < len(events) {
		best := ""
		found := false
		for _, n := range names {
			if len(groups[n]) == 0 {
				continue
			}
			if !found || groups[n][0].Event.GetTimeUnixNano() < groups[best][0].Event.GetTimeUnixNano() {
				best, found = n, true
			}
		}
		out = append(out, groups[best][0])
		groups[best] = groups[best][1:]
	}
	return out
}

// Investigate reads the events of every execution of one intent (all
// executions on pc.exec.<intent>.*, the one asked about among them). The
// events may include the signed sessions-journal entries of the sessions
// the calls named: then the first answer (one agent process or two) comes
// from the journal (client, version, remote address), not from the session
// ids the callers put in their requests.
func Investigate(executionID string, events []Stored) Investigation {
	journal := map[string]*pb.SessionChanged{}
	calls := events[:0:0]
	for _, s := range events {
		if sc := s.Event.GetSessionChanged(); sc != nil {
			journal[sc.GetSessionId()] = sc
			continue
		}
		calls = append(calls, s)
	}
	events = byStreamThenTime(calls)
	inv := Investigation{ExecutionID: executionID}
	byExec := map[string][]Stored{}
	for _, s := range events {
		id := s.Event.GetExecutionId()
		byExec[id] = append(byExec[id], s)
		x := s.Event.GetExecutionChanged().GetExecution()
		corr := s.Event.GetExecutionChanged().GetCorrelation()
		inv.Timeline = append(inv.Timeline, Step{
			Time: time.Unix(0, s.Event.GetTimeUnixNano()).UTC(), Seq: s.Seq, Execution: id,
			Event: strings.TrimPrefix(s.Event.GetType().String(), "EVENT_TYPE_"), Gateway: s.Event.GetGatewayId(),
			Session: corr.GetSessionId(), Request: corr.GetJsonrpcId(), Caller: corr.GetCaller(), Detail: detail(s.Event, x),
		})
	}
	for id := range byExec {
		if id != executionID {
			inv.Related = append(inv.Related, id)
		}
	}
	sort.Strings(inv.Related)
	mine := byExec[executionID]
	var first *pb.Execution
	if len(mine) > 0 {
		first = mine[0].Event.GetExecutionChanged().GetExecution()
	}
	at := func(s Stored) string {
		return fmt.Sprintf("seq %d %s at %s by gateway %s", s.Seq, strings.TrimPrefix(s.Event.GetType().String(), "EVENT_TYPE_"),
			time.Unix(0, s.Event.GetTimeUnixNano()).UTC().Format(time.RFC3339Nano), s.Event.GetGatewayId())
	}
	find := func(t ...pb.EventType) []Stored {
		var out []Stored
		for _, s := range mine {
			for _, tt := range t {
				if s.Event.GetType() == tt {
					out = append(out, s)
				}
			}
		}
		return out
	}

	// 1. One agent process or two?
	sessions := map[string][]string{}
	for id, evs := range byExec {
		for _, s := range evs {
			// A call without a correlation (a Connect caller that named
			// none) is a call without a session.
			if c := s.Event.GetExecutionChanged().GetCorrelation(); s.Event.GetType() == pb.EventType_EVENT_TYPE_ACCEPTED || s.Event.GetType() == pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED || s.Event.GetType() == pb.EventType_EVENT_TYPE_ATTACHED {
				key := c.GetSessionId()
				sessions[key] = append(sessions[key], fmt.Sprintf("%s: %s of %s (actor %s, request %s%s)", at(s), "call", id, s.Event.GetExecutionChanged().GetExecution().GetActor(), c.GetJsonrpcId(), sentBy(c)))
			}
		}
	}
	// Calls without a session (stateless MCP 2026-07-28, or a Connect
	// caller that named none) are not one session: nothing recorded tells
	// their processes apart, so they never count towards "one".
	sessionless := sessions[""]
	delete(sessions, "")
	q1 := Answer{Question: "1. One agent process or two?"}
	switch {
	case len(sessions) == 0 && len(sessionless) > 0:
		q1.Answer = fmt.Sprintf("unknown: %d call(s) carried no session (stateless MCP or a Connect caller without one), and the ledger records no client process for them, so one process cannot be told from two; question 5 links the calls by operation key or fingerprint", len(sessionless))
	case len(journal) > 0:
		q1.Answer = journalAnswer(sessions, journal, len(sessionless))
	case len(sessions) <= 1 && len(sessionless) == 0:
		q1.Answer = "one: every call came from one agent session"
	default:
		q1.Answer = fmt.Sprintf("%d agent sessions sent calls for this intent", len(sessions))
		if len(sessionless) > 0 {
			q1.Answer += fmt.Sprintf(", and %d call(s) carried no session (their processes cannot be told apart)", len(sessionless))
		}
	}
	for _, e := range sessionless {
		q1.Evidence = append(q1.Evidence, "no session: "+e)
	}
	for sess, ev := range sessions {
		for _, e := range ev {
			q1.Evidence = append(q1.Evidence, "session "+sess+": "+e)
		}
		if sc, ok := journal[sess]; ok {
			q1.Evidence = append(q1.Evidence, fmt.Sprintf("session %s: journal: actor %s, client %s %s, protocol %s, from %s",
				sess, sc.GetActor(), sc.GetClientName(), sc.GetClientVersion(), sc.GetProtocolVersion(), orUnknown(sc.GetRemoteAddr())))
		}
	}
	sort.Strings(q1.Evidence)

	// 2. Did the first call get authorization and reach dispatch?
	q2 := Answer{Question: "2. Did the first call get authorization and reach dispatch?"}
	auth := find(pb.EventType_EVENT_TYPE_AUTHORIZED)
	disp := find(pb.EventType_EVENT_TYPE_DISPATCHED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED)
	denied := find(pb.EventType_EVENT_TYPE_DENIED)
	switch {
	case len(denied) > 0:
		q2.Answer = "no: it was denied (" + denied[0].Event.GetExecutionChanged().GetExecution().GetReason() + ")"
		q2.Evidence = append(q2.Evidence, at(denied[0]))
	case len(disp) > 0:
		q2.Answer = "yes: it was dispatched"
		if len(auth) > 0 {
			q2.Answer += " after authorization by " + auth[0].Event.GetExecutionChanged().GetExecution().GetAuthorizedBy()
			q2.Evidence = append(q2.Evidence, at(auth[0]))
		} else {
			q2.Answer += " under the session's authorization"
		}
		for _, d := range disp {
			q2.Evidence = append(q2.Evidence, at(d))
		}
	case first.GetState() == pb.State_STATE_AWAITING_APPROVAL:
		q2.Answer = "no: it waits for approval"
	default:
		q2.Answer = "no: it never reached dispatch"
	}

	// 3. Did the gateway get a response or exit status from the target?
	q3 := Answer{Question: "3. Did the gateway get a response or an exit status from the target?"}
	res := find(pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED)
	unknown := find(pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN)
	notSent := find(pb.EventType_EVENT_TYPE_NOT_SENT, pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED)
	switch {
	case len(res) > 0:
		x := res[len(res)-1].Event.GetExecutionChanged().GetExecution()
		q3.Answer = fmt.Sprintf("yes: the target answered %d (result %s)", x.GetTargetStatus(), x.GetResultReference())
		for _, s := range unknown {
			q3.Evidence = append(q3.Evidence, at(s)+": outcome unknown first ("+s.Event.GetExecutionChanged().GetExecution().GetReason()+")")
		}
		q3.Evidence = append(q3.Evidence, at(res[len(res)-1]))
	case len(unknown) > 0:
		q3.Answer = "no: the outcome is unknown (" + unknown[len(unknown)-1].Event.GetExecutionChanged().GetExecution().GetReason() + ")"
		q3.Evidence = append(q3.Evidence, at(unknown[len(unknown)-1]))
	case len(notSent) > 0:
		q3.Answer = "no: nothing reached the target (" + strings.ToLower(strings.TrimPrefix(notSent[len(notSent)-1].Event.GetType().String(), "EVENT_TYPE_")) + ")"
		q3.Evidence = append(q3.Evidence, at(notSent[len(notSent)-1]))
	default:
		q3.Answer = "no: nothing was sent yet"
	}

	// 4. Did result delivery fail after the target completed?
	q4 := Answer{Question: "4. Did result delivery fail after the target completed?"}
	deliv := find(pb.EventType_EVENT_TYPE_DELIVERED)
	var attachedAfter []Stored
	if len(res) > 0 {
		for _, s := range find(pb.EventType_EVENT_TYPE_ATTACHED) {
			if s.Seq > res[0].Seq {
				attachedAfter = append(attachedAfter, s)
			}
		}
	}
	switch {
	case len(res) == 0:
		q4.Answer = "not applicable: the target did not complete"
	case len(deliv) > 0 && len(attachedAfter) == 0:
		q4.Answer = "no: the result was delivered"
		q4.Evidence = append(q4.Evidence, at(deliv[0]))
	default:
		q4.Answer = "yes: the target completed but the first call's connection did not take the result"
		if len(deliv) == 0 {
			q4.Answer += "; it is still not delivered"
		}
		for _, s := range attachedAfter {
			q4.Evidence = append(q4.Evidence, at(s)+": a retry collected the stored result")
		}
		q4.Evidence = append(q4.Evidence, at(res[0]))
		for _, d := range deliv {
			q4.Evidence = append(q4.Evidence, at(d))
		}
	}

	// 5. Did the second call reuse the execution id / Idempotency-Key, or create a new attempt?
	q5 := Answer{Question: "5. Did the second call reuse the execution id / Idempotency-Key, or create a new attempt?"}
	att := find(pb.EventType_EVENT_TYPE_ATTACHED)
	switch {
	case len(att) > 0:
		q5.Answer = fmt.Sprintf("reused: %d later call(s) attached to %s (Idempotency-Key %s)", len(att), executionID, executionID)
		if len(disp) == 0 {
			q5.Answer = fmt.Sprintf("reused: %d later call(s) attached to %s; it was never sent, so no Idempotency-Key reached a target", len(att), executionID)
		}
		if len(disp) > 1 {
			q5.Answer += fmt.Sprintf("; it was resent %d time(s) with the same key", len(disp)-1)
		}
		if x := mine[len(mine)-1].Event.GetExecutionChanged().GetExecution(); x.GetState() == pb.State_STATE_OUTCOME_UNKNOWN && x.GetRetryClass() == pb.RetryClass_RETRY_CLASS_IRREVERSIBLE {
			q5.Answer += "; the retry was held for review (irreversible, outcome unknown): nothing was resent"
		}
		for _, s := range att {
			q5.Evidence = append(q5.Evidence, at(s))
		}
	case len(inv.Related) > 0:
		var whys []string
		for _, id := range inv.Related {
			if evs := byExec[id]; len(evs) > 0 && len(mine) > 0 {
				whys = append(whys, id+": "+whyNew(mine, first, evs))
			}
		}
		q5.Answer = "new attempt(s): " + strings.Join(inv.Related, ", ")
		if len(whys) > 0 {
			q5.Answer += " (" + strings.Join(whys, "; ") + ")"
		}
	default:
		q5.Answer = "no second call was recorded"
	}
	for _, id := range inv.Related {
		if evs := byExec[id]; len(evs) > 0 {
			q5.Evidence = append(q5.Evidence, at(evs[0])+": separate execution "+id)
		}
	}
	inv.Answers = []Answer{q1, q2, q3, q4, q5}
	return inv
}

// whyNew says why another execution of the intent (its events other) did
// not attach to this one (its events mine, its first record first), from
// what both recorded and the matching rules: a key decides when present;
// without one, a call attaches only while the prior execution awaits
// delivery or resolution, inside the match window.
func whyNew(mine []Stored, first *pb.Execution, other []Stored) string {
	o := other[0]
	if o.Seq < mine[0].Seq {
		return "an earlier attempt"
	}
	if key := o.Event.GetExecutionChanged().GetExecution().GetOperationKey(); key != "" && key != first.GetOperationKey() {
		return "it carried another operation key: a new operation"
	}
	var then pb.State
	for _, s := range mine {
		if s.Seq < o.Seq {
			then = s.Event.GetExecutionChanged().GetExecution().GetState()
		}
	}
	switch then {
	case pb.State_STATE_DELIVERED:
		return "this execution's result had been delivered when it came, and a call without an operation key attaches only until then"
	case pb.State_STATE_NOT_EXECUTED:
		return "this execution had been resolved as not executed when it came, and a call without an operation key attaches only until then"
	}
	return "it came outside the match window"
}

func detail(ev *pb.Event, x *pb.Execution) string {
	switch ev.GetType() {
	case pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED:
		return fmt.Sprintf("target answered %d", x.GetTargetStatus())
	case pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, pb.EventType_EVENT_TYPE_NOT_SENT:
		return x.GetReason()
	case pb.EventType_EVENT_TYPE_AUTHORIZED:
		return "by " + x.GetAuthorizedBy()
	case pb.EventType_EVENT_TYPE_DENIED:
		if by := x.GetAuthorizedBy(); by != "" && !strings.Contains(x.GetReason(), by) {
			return "by " + by + ": " + x.GetReason()
		}
		return x.GetReason()
	case pb.EventType_EVENT_TYPE_ACCEPTED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED:
		return "tool " + x.GetTool() + ", actor " + x.GetActor()
	}
	return ""
}

// Text renders an investigation for people.
func (inv Investigation) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Investigation of %s\n\n", inv.ExecutionID)
	for _, a := range inv.Answers {
		fmt.Fprintf(&b, "%s\n   %s\n", a.Question, a.Answer)
		for _, e := range a.Evidence {
			fmt.Fprintf(&b, "     - %s\n", e)
		}
	}
	fmt.Fprintf(&b, "\nTimeline\n")
	for _, s := range inv.Timeline {
		caller := ""
		if s.Caller != "" {
			caller = "  caller " + s.Caller
		}
		fmt.Fprintf(&b, "  %s  seq %-6d %-22s %s  gw %s  session %s  req %s%s  %s\n", s.Time.Format("15:04:05.000"), s.Seq, s.Event, s.Execution, s.Gateway, s.Session, s.Request, caller, s.Detail)
	}
	return b.String()
}

// sentBy names the Connect caller that sent a call, for evidence lines.
func sentBy(c *pb.Correlation) string {
	if c.GetCaller() == "" {
		return ""
	}
	return ", sent by Connect caller " + c.GetCaller()
}

// journalAnswer counts agent processes from the signed sessions journal:
// sessions with the same actor, client, version and remote host are one
// process's reconnects; a session the calls named but the journal does
// not hold is only the caller's word; sessionless calls (no session at
// all) are counted apart and rule out the answer "one".
func journalAnswer(sessions map[string][]string, journal map[string]*pb.SessionChanged, sessionless int) string {
	procs := map[string]bool{}
	var unjournaled []string
	for sess := range sessions {
		sc, ok := journal[sess]
		if !ok {
			unjournaled = append(unjournaled, sess)
			continue
		}
		host := sc.GetRemoteAddr()
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host = host[:i]
		}
		procs[sc.GetActor()+"\x00"+sc.GetClientName()+"\x00"+sc.GetClientVersion()+"\x00"+host] = true
	}
	a := fmt.Sprintf("%d agent session(s) in the signed sessions journal, from %d distinct client process(es) (actor, client, version, host)", len(sessions)-len(unjournaled), len(procs))
	if len(procs) <= 1 && len(unjournaled) == 0 && sessionless == 0 {
		a = "one: " + a
	}
	if sessionless > 0 {
		a += fmt.Sprintf("; %d call(s) carried no session (their processes cannot be told apart)", sessionless)
	}
	if len(unjournaled) > 0 {
		sort.Strings(unjournaled)
		a += fmt.Sprintf("; %d session id(s) only named by the calls, not in the journal: %s", len(unjournaled), strings.Join(unjournaled, ", "))
	}
	return a
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown address"
	}
	return s
}
