package audit_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"github.com/portcullis-dev/portcullis/trust"
)

// record is a small ledger written in memory: every stream's records in
// order, the running digest of each stream, gw-1 enrolled with key.
type record struct {
	t      *testing.T
	key    ed25519.PrivateKey
	recs   []audit.Record
	seq    map[string]uint64
	digest map[string][]byte
}

func newRecord(t *testing.T) *record {
	_, key, _ := ed25519.GenerateKey(nil)
	return &record{t: t, key: key, seq: map[string]uint64{}, digest: map[string][]byte{}}
}

func (l *record) keys() map[string][]ed25519.PublicKey {
	return map[string][]ed25519.PublicKey{"gw-1": {l.key.Public().(ed25519.PublicKey)}}
}

// add seals ev after prev (nil: the first on its subject), signs it with
// key as gatewayID and stores it on stream; it returns the stored record's
// sequence and ev (hash set).
func (l *record) add(stream string, ev *pb.Event, prev *pb.Event, gatewayID string, key ed25519.PrivateKey) (uint64, *pb.Event) {
	ev.GatewayId, ev.TimeUnixNano = gatewayID, time.Now().UnixNano()
	if ev.EventId == "" {
		ev.EventId = fmt.Sprintf("evt_%d", len(l.recs)+1)
	}
	ledger.Seal(ev, prev.GetHash())
	ledger.Sign(ev, key)
	data, err := proto.Marshal(ev)
	if err != nil {
		l.t.Fatal(err)
	}
	l.seq[stream]++
	s := l.seq[stream]
	l.digest[stream] = projector.Chain(l.digest[stream], s, data)
	l.recs = append(l.recs, audit.Record{Stream: stream, Seq: s, Subject: ev.GetSubject(), Data: data})
	return s, ev
}

// step appends the next execution event on x's subject after prev.
func (l *record) step(x *pb.Execution, t pb.EventType, s pb.State, prev *pb.Event, gatewayID string, key ed25519.PrivateKey) (uint64, *pb.Event) {
	x = proto.Clone(x).(*pb.Execution)
	x.State = s
	subj := ledger.ExecutionSubject(x.GetIntentToken(), x.GetExecutionId())
	return l.add(ledger.ExecutionsStream, &pb.Event{Type: t, Subject: subj, ExecutionId: x.GetExecutionId(),
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x}}}, prev, gatewayID, key)
}

func (l *record) budget(prev *pb.Event, gatewayID string, key ed25519.PrivateKey) (uint64, *pb.Event) {
	return l.add(keeper.Stream, &pb.Event{Type: pb.EventType_EVENT_TYPE_BUDGET_RESERVED, Subject: keeper.Subject("acme"),
		Body: &pb.Event_BudgetChanged{BudgetChanged: &pb.BudgetDecision{Account: "acme"}}}, prev, gatewayID, key)
}

// checkpoint seals the executions stream as it stands (digest: nil, the
// true running digest).
func (l *record) checkpoint(prev *pb.Event, digest []byte, gatewayID string, key ed25519.PrivateKey) (uint64, *pb.Event) {
	if digest == nil {
		digest = l.digest[ledger.ExecutionsStream]
	}
	return l.add("PORTCULLIS_AUDIT", &pb.Event{Type: pb.EventType_EVENT_TYPE_CHECKPOINT, Subject: "pc.audit." + ledger.ExecutionsStream,
		Body: &pb.Event_Checkpoint{Checkpoint: &pb.Checkpoint{Stream: ledger.ExecutionsStream, LastSeq: l.seq[ledger.ExecutionsStream], RunningDigest: digest}}}, prev, gatewayID, key)
}

func (l *record) verify(recs []audit.Record) audit.Report {
	v := audit.NewVerifier(l.keys())
	for _, r := range recs {
		v.Add(r)
	}
	return v.Report()
}

// execution is a new execution's record (not yet accepted).
func execution(n int) *pb.Execution {
	return &pb.Execution{ExecutionId: fmt.Sprintf("act_01JEXAMPLE%014d", n), IntentToken: fmt.Sprintf("f%063x", n), Tool: "create_payment",
		Actor: "agent-7", RetryClass: pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY, CanonicalRecord: `{"tool":"create_payment"}`}
}

// wantFailures asserts that rep names exactly the given (stream, seq,
// reason) failures, in order.
func wantFailures(t *testing.T, rep audit.Report, want ...audit.Failure) {
	t.Helper()
	ok := len(rep.Failures) == len(want)
	for i := 0; ok && i < len(want); i++ {
		f := rep.Failures[i]
		ok = f.Stream == want[i].Stream && f.Seq == want[i].Seq && strings.Contains(f.Reason, want[i].Reason)
	}
	if !ok {
		t.Fatalf("failures:\n%v\nwant:\n%v", rep.Failures, want)
	}
	if rep.OK != (len(want) == 0) {
		t.Fatalf("OK = %v with %d failures", rep.OK, len(want))
	}
}

// An event published with the right prev_hash but signed by a key that is
// not its claimed writer's (or by a writer nobody enrolled) is one failure:
// the genuine event after it links, as its gateway wrote it, to the last
// valid event, and verify continues the chain from there as the fold
// does. So on the executions, budget and checkpoints streams.
func TestForgedEventIsOneFailure(t *testing.T) {
	_, rogue, _ := ed25519.GenerateKey(nil)
	for _, claims := range []string{"gw-1", "gw-evil"} {
		t.Run("claims "+claims, func(t *testing.T) {
			l := newRecord(t)
			x := execution(1)
			_, accepted := l.step(x, pb.EventType_EVENT_TYPE_ACCEPTED, pb.State_STATE_ACCEPTED, nil, "gw-1", l.key)
			_, dispatched := l.step(x, pb.EventType_EVENT_TYPE_DISPATCHED, pb.State_STATE_DISPATCHED, accepted, "gw-1", l.key)
			forgedExec, _ := l.step(x, pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, dispatched, claims, rogue)
			_, observed := l.step(x, pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, dispatched, "gw-1", l.key)
			l.step(x, pb.EventType_EVENT_TYPE_DELIVERED, pb.State_STATE_DELIVERED, observed, "gw-1", l.key)

			_, b1 := l.budget(nil, "gw-1", l.key)
			_, b2 := l.budget(b1, "gw-1", l.key)
			forgedBudget, _ := l.budget(b2, claims, rogue)
			_, b3 := l.budget(b2, "gw-1", l.key)
			l.budget(b3, "gw-1", l.key)

			_, cp1 := l.checkpoint(nil, nil, "gw-1", l.key)
			y := execution(2)
			l.step(y, pb.EventType_EVENT_TYPE_ACCEPTED, pb.State_STATE_ACCEPTED, nil, "gw-1", l.key)
			forgedCP, _ := l.checkpoint(cp1, make([]byte, 32), claims, rogue)
			_, cp2 := l.checkpoint(cp1, nil, "gw-1", l.key)
			l.checkpoint(cp2, nil, "gw-1", l.key)

			reason := "signature does not verify with gateway gw-1's enrolled key"
			if claims != "gw-1" {
				reason = `writer "gw-evil" is not an enrolled gateway`
			}
			rep := l.verify(l.recs)
			wantFailures(t, rep, // in stream order
				audit.Failure{Stream: "PORTCULLIS_AUDIT", Seq: forgedCP, Reason: reason},
				audit.Failure{Stream: keeper.Stream, Seq: forgedBudget, Reason: reason},
				audit.Failure{Stream: ledger.ExecutionsStream, Seq: forgedExec, Reason: reason},
			)
			if rep.Checkpoints != 3 || rep.Events != len(l.recs) || len(rep.Writers) != 1 {
				t.Fatalf("report: %+v", rep)
			}
		})
	}
}

// Removing, rewriting or reordering a genuine event still breaks the
// chain: the chain continues only from the last valid event, which the
// events after the gap do not link to, so each of them is named (the
// gateways' fold quarantines each of them likewise).
func TestRemovedOrRewrittenEventStillBreaksTheChain(t *testing.T) {
	l := newRecord(t)
	x := execution(1)
	_, accepted := l.step(x, pb.EventType_EVENT_TYPE_ACCEPTED, pb.State_STATE_ACCEPTED, nil, "gw-1", l.key)
	_, dispatched := l.step(x, pb.EventType_EVENT_TYPE_DISPATCHED, pb.State_STATE_DISPATCHED, accepted, "gw-1", l.key)
	_, observed := l.step(x, pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, dispatched, "gw-1", l.key)
	l.step(x, pb.EventType_EVENT_TYPE_DELIVERED, pb.State_STATE_DELIVERED, observed, "gw-1", l.key)
	wantFailures(t, l.verify(l.recs))

	// renumber gives records consecutive sequences, as a rewritten stream has.
	renumber := func(recs []audit.Record) []audit.Record {
		for i := range recs {
			recs[i].Seq = uint64(i + 1)
		}
		return recs
	}
	clone := func() []audit.Record { return append([]audit.Record(nil), l.recs...) }
	broken := func(seq, after uint64) audit.Failure {
		return audit.Failure{Stream: ledger.ExecutionsStream, Seq: seq, Reason: fmt.Sprintf("chain broken: prev_hash does not match the event at sequence %d", after)}
	}

	// Removed: the dispatched event (the stream renumbered).
	recs := renumber(append(clone()[:1:1], l.recs[2:]...))
	wantFailures(t, l.verify(recs), broken(2, 1), broken(3, 1))

	// Rewritten without its writer's key: its hash fails, and the events
	// after it link to what was there before.
	recs = clone()
	ev := new(pb.Event)
	if err := proto.Unmarshal(recs[1].Data, ev); err != nil {
		t.Fatal(err)
	}
	ev.GetExecutionChanged().GetExecution().Actor = "agent-8"
	recs[1].Data = marshal(t, ev)
	wantFailures(t, l.verify(recs), audit.Failure{Stream: ledger.ExecutionsStream, Seq: 2, Reason: "hash mismatch"}, broken(3, 1), broken(4, 1))

	// Rewritten and re-signed with the enrolled key (an insider): the
	// rewritten event verifies by itself; the next ones do not link to it.
	recs = clone()
	ev.GetExecutionChanged().GetExecution().Actor = "agent-7"
	ev.EventId = "evt_rewritten"
	ledger.Seal(ev, ev.GetPrevHash())
	ledger.Sign(ev, l.key)
	recs[1].Data = marshal(t, ev)
	wantFailures(t, l.verify(recs), broken(3, 2), broken(4, 2))

	// Two events swapped (renumbered): the first out of place is named,
	// the second then follows the last valid event, and the one after the
	// pair links to neither.
	recs = clone()
	recs[1], recs[2] = recs[2], recs[1]
	wantFailures(t, l.verify(renumber(recs)), broken(2, 1), broken(4, 3))
}

// The chain is walked in stream order across the batches that are checked
// in parallel: a long record verifies, and a forged event in a later
// batch is still one failure.
func TestVerifyAcrossBatches(t *testing.T) {
	l := newRecord(t)
	_, rogue, _ := ed25519.GenerateKey(nil)
	var prev *pb.Event
	var forged uint64
	for i := range 3000 {
		if i == 2500 {
			forged, _ = l.budget(prev, "gw-1", rogue)
		}
		_, prev = l.budget(prev, "gw-1", l.key)
	}
	wantFailures(t, l.verify(l.recs), audit.Failure{Stream: keeper.Stream, Seq: forged, Reason: "signature does not verify"})
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Verify names every stored enrollment record the ledger's root did not
// sign (forged, or not a signed record at all) where the meta stream holds
// it, as the gateways quarantine it, and never counts its key: an event
// signed with the forged record's key is a failure of its own.
func TestVerifyNamesForgedEnrollments(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, rogueRoot, _ := ed25519.GenerateKey(nil)
	_, evil, _ := ed25519.GenerateKey(nil)
	l := newRecord(t)
	now := time.Now()
	genuine := marshal(t, trust.EnrollSelf(root, l.key, "gw-1", "", now))
	forged := marshal(t, trust.EnrollSelf(rogueRoot, evil, "gw-evil", "", now))
	lt := audit.LedgerTrust{
		Root:        marshal(t, trust.NewRoot(root, now)),
		Enrollments: [][]byte{genuine, forged},
		EnrollmentRecords: []audit.Record{
			{Stream: audit.MetaStream, Seq: 2, Subject: "pc.meta.enroll.gw-1.aa", Data: genuine},
			{Stream: audit.MetaStream, Seq: 5, Subject: "pc.meta.enroll.gw-evil.bb", Data: forged},
			{Stream: audit.MetaStream, Seq: 6, Subject: "pc.meta.enroll.gw-2.cc", Data: []byte("garbage")},
		},
	}
	x := execution(1)
	_, accepted := l.step(x, pb.EventType_EVENT_TYPE_ACCEPTED, pb.State_STATE_ACCEPTED, nil, "gw-1", l.key)
	forgedEvent, _ := l.step(x, pb.EventType_EVENT_TYPE_DISPATCHED, pb.State_STATE_DISPATCHED, accepted, "gw-evil", evil)
	l.step(x, pb.EventType_EVENT_TYPE_DISPATCHED, pb.State_STATE_DISPATCHED, accepted, "gw-1", l.key)

	v, _, err := audit.NewAnchoredVerifier(lt, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.recs {
		v.Add(r)
	}
	rep := v.Report()
	wantFailures(t, rep,
		audit.Failure{Stream: ledger.ExecutionsStream, Seq: forgedEvent, Reason: `writer "gw-evil" is not an enrolled gateway`},
		audit.Failure{Stream: audit.MetaStream, Seq: 5, Reason: "enrollment record on pc.meta.enroll.gw-evil.bb not trusted"},
		audit.Failure{Stream: audit.MetaStream, Seq: 6, Reason: "enrollment record on pc.meta.enroll.gw-2.cc is not a signed record"},
	)
	if rep.Failures[1].Subject != "pc.meta.enroll.gw-evil.bb" {
		t.Fatalf("subject: %+v", rep.Failures[1])
	}

	// An export made before records had places: the forged one is still named.
	lt.EnrollmentRecords = nil
	v, _, err = audit.NewAnchoredVerifier(lt, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantFailures(t, v.Report(), audit.Failure{Stream: audit.MetaStream, Reason: "enrollment record not trusted"})
}
