package ledger

import (
	"errors"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// step is one event on an execution's subject: its type and the state its
// record says the execution is in afterwards.
type step struct {
	event pb.EventType
	state pb.State
}

// execEvent builds an unsealed event carrying an ExecutionChanged record.
// An ACCEPTED_DISPATCHED record carries its first dispatch (time, count,
// deadline), as the ledger writes it.
func execEvent(id string, i int, class pb.RetryClass, s step) *pb.Event {
	ev := execEventBare(id, i, class, s)
	if s.event == pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED {
		x := ev.GetExecutionChanged().GetExecution()
		x.DispatchedAt, x.DispatchCount = timestamppb.New(time.Unix(1, 0)), 1
		x.DispatchDeadline = timestamppb.New(time.Unix(1, 0).Add(30*time.Second + DispatchGrace))
	}
	return ev
}

func execEventBare(id string, i int, class pb.RetryClass, s step) *pb.Event {
	return &pb.Event{
		EventId:      "evt_" + id + "_" + string(rune('a'+i)),
		Type:         s.event,
		Subject:      ExecutionSubject("tok", id),
		ExecutionId:  id,
		TimeUnixNano: int64(1_000 + i),
		GatewayId:    "gw-test",
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{ExecutionId: id, State: s.state, RetryClass: class, Tool: "deploy_release", IntentToken: "tok"},
		}},
	}
}

// sealChain builds and seals the events of steps, each linked to the one
// before it.
func sealChain(id string, class pb.RetryClass, steps ...step) []*pb.Event {
	var out []*pb.Event
	var prevHash []byte
	for i, s := range steps {
		ev := execEvent(id, i, class, s)
		Seal(ev, prevHash)
		prevHash = ev.GetHash()
		out = append(out, ev)
	}
	return out
}

// checkChain runs CheckNext over a whole chain, the way the projector folds it.
func checkChain(evs []*pb.Event) error {
	var prev *pb.Event
	for _, ev := range evs {
		if err := CheckNext(prev, ev); err != nil {
			return err
		}
		prev = ev
	}
	return nil
}

var (
	stAccepted   = step{pb.EventType_EVENT_TYPE_ACCEPTED, sAccepted}
	stAccDisp    = step{pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED, sDisp}
	stAcceptedPU = step{pb.EventType_EVENT_TYPE_ACCEPTED, sAwaiting}
	stAuthorized = step{pb.EventType_EVENT_TYPE_AUTHORIZED, sAuthd}
	stDispatched = step{pb.EventType_EVENT_TYPE_DISPATCHED, sDisp}
	stNotSent    = step{pb.EventType_EVENT_TYPE_NOT_SENT, sNotSent}
	stUnknown    = step{pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, sUnknown}
	stResult     = step{pb.EventType_EVENT_TYPE_RESULT_OBSERVED, sCompleted}
	stDelivered  = step{pb.EventType_EVENT_TYPE_DELIVERED, sDelivered}
	stResolvedC  = step{pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, sCompleted}
	stResolvedN  = step{pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED, sNotExec}
	stDenied     = step{pb.EventType_EVENT_TYPE_DENIED, sDenied}
)

func attached(s pb.State) step { return step{pb.EventType_EVENT_TYPE_ATTACHED, s} }

func TestCheckNextValidChains(t *testing.T) {
	tests := []struct {
		name  string
		class pb.RetryClass
		steps []step
	}{
		{"session dispatch, resend with the same key, delivered", pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY,
			[]step{stAccepted, attached(sAccepted), stDispatched, attached(sDisp), stUnknown, stDispatched, stResult, attached(sCompleted), stDelivered}},
		{"per-use approval, unknown resolved as not executed", pb.RetryClass_RETRY_CLASS_IRREVERSIBLE,
			[]step{stAcceptedPU, attached(sAwaiting), stAuthorized, stDispatched, stUnknown, attached(sUnknown), stResolvedN}},
		{"not sent, resumed, unknown resolved as completed", pb.RetryClass_RETRY_CLASS_STATUS_QUERY,
			[]step{stAccepted, stDispatched, stNotSent, attached(sNotSent), stDispatched, stUnknown, stResolvedC, stDelivered}},
		{"denied while awaiting approval, retry attached", pb.RetryClass_RETRY_CLASS_STATUS_QUERY,
			[]step{stAcceptedPU, stDenied, attached(sDenied)}},
		{"read only, recorded", pb.RetryClass_RETRY_CLASS_READ_ONLY,
			[]step{stAccepted, stDispatched, stResult, stDelivered}},
		{"accepted and dispatched in one event, retry waits, result, delivered", pb.RetryClass_RETRY_CLASS_STATUS_QUERY,
			[]step{stAccDisp, attached(sDisp), stResult, attached(sCompleted), stDelivered}},
		{"accepted and dispatched in one event, gateway died: expired, resent with the same key", pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY,
			[]step{stAccDisp, stUnknown, attached(sUnknown), stDispatched, stResult}},
		{"accepted and dispatched in one event, not sent, resumed", pb.RetryClass_RETRY_CLASS_IRREVERSIBLE,
			[]step{stAccDisp, stNotSent, stDispatched, stResult}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkChain(sealChain("exe_01", tc.class, tc.steps...)); err != nil {
				t.Fatalf("valid chain refused: %v", err)
			}
		})
	}
}

func TestCheckNextCorrupt(t *testing.T) {
	const ik = pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY
	// Each case returns (prev, next): next must be refused with ErrCorrupt.
	tests := []struct {
		name  string
		build func() (prev, next *pb.Event)
	}{
		{"byte changed in the record after sealing", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched)
			c[1].GetExecutionChanged().GetExecution().Tool = "deploy_releasf"
			return c[0], c[1]
		}},
		{"byte changed in the envelope after sealing", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched)
			c[1].GatewayId = "gw-tesu"
			return c[0], c[1]
		}},
		{"byte changed in the hash", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched)
			c[1].Hash[0] ^= 0x01
			return c[0], c[1]
		}},
		{"first event changed after sealing", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted)
			c[0].TimeUnixNano++
			return nil, c[0]
		}},
		{"unsealed event", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted)
			return c[0], execEvent("exe_01", 1, ik, stDispatched)
		}},
		{"wrong prev_hash", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched)
			other := sealChain("exe_01", ik, stAcceptedPU)
			next := execEvent("exe_01", 1, ik, stDispatched)
			Seal(next, other[0].GetHash())
			return c[0], next
		}},
		{"prev_hash skips an event", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched, stResult)
			return c[0], c[2]
		}},
		{"first event with a prev_hash", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted)
			next := execEvent("exe_01", 0, ik, stAccepted)
			Seal(next, c[0].GetHash())
			return nil, next
		}},
		{"illegal transition ACCEPTED then RESULT_OBSERVED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stResult)
			return c[0], c[1]
		}},
		{"illegal transition AWAITING_APPROVAL then DISPATCHED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAcceptedPU, stDispatched)
			return c[0], c[1]
		}},
		{"resend after unknown outcome of an irreversible action", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", pb.RetryClass_RETRY_CLASS_IRREVERSIBLE, stAccepted, stDispatched, stUnknown, stDispatched)
			return c[2], c[3]
		}},
		{"dispatch after DELIVERED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched, stResult, stDelivered, stDispatched)
			return c[3], c[4]
		}},
		{"record state disagrees with DISPATCHED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, step{pb.EventType_EVENT_TYPE_DISPATCHED, sCompleted})
			return c[0], c[1]
		}},
		{"record state changes on ATTACHED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stDispatched, attached(sCompleted))
			return c[1], c[2]
		}},
		{"first event is DISPATCHED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stDispatched)
			return nil, c[0]
		}},
		{"first event is ACCEPTED into DISPATCHED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, step{pb.EventType_EVENT_TYPE_ACCEPTED, sDisp})
			return nil, c[0]
		}},
		{"ACCEPTED_DISPATCHED after ACCEPTED (it only starts an execution)", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stAccDisp)
			return c[0], c[1]
		}},
		{"ACCEPTED_DISPATCHED after NOT_SENT", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccDisp, stNotSent, stAccDisp)
			return c[1], c[2]
		}},
		{"ACCEPTED_DISPATCHED into ACCEPTED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, step{pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED, sAccepted})
			return nil, c[0]
		}},
		{"ACCEPTED_DISPATCHED without a dispatch deadline", func() (*pb.Event, *pb.Event) {
			next := execEvent("exe_01", 0, ik, stAccDisp)
			next.GetExecutionChanged().GetExecution().DispatchDeadline = nil
			Seal(next, nil)
			return nil, next
		}},
		{"ACCEPTED_DISPATCHED without a first dispatch time", func() (*pb.Event, *pb.Event) {
			next := execEvent("exe_01", 0, ik, stAccDisp)
			next.GetExecutionChanged().GetExecution().DispatchedAt = nil
			Seal(next, nil)
			return nil, next
		}},
		{"ACCEPTED again after ACCEPTED", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted, stAccepted)
			return c[0], c[1]
		}},
		{"execution id of the record differs from the envelope", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted)
			next := execEvent("exe_01", 1, ik, stDispatched)
			next.GetExecutionChanged().GetExecution().ExecutionId = "exe_02"
			Seal(next, c[0].GetHash())
			return c[0], next
		}},
		{"execution id mismatch on the first event", func() (*pb.Event, *pb.Event) {
			next := execEvent("exe_01", 0, ik, stAccepted)
			next.ExecutionId = "exe_02"
			Seal(next, nil)
			return nil, next
		}},
		{"event without a body", func() (*pb.Event, *pb.Event) {
			c := sealChain("exe_01", ik, stAccepted)
			next := execEvent("exe_01", 1, ik, stDispatched)
			next.Body = nil
			Seal(next, c[0].GetHash())
			return c[0], next
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev, next := tc.build()
			err := CheckNext(prev, next)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("CheckNext = %v, want ErrCorrupt", err)
			}
		})
	}
}

// CheckHash must leave the event as it found it, hash and signature included.
func TestCheckHashKeepsEvent(t *testing.T) {
	ev := sealChain("exe_01", pb.RetryClass_RETRY_CLASS_STATUS_QUERY, stAccepted)[0]
	ev.Signature = []byte("sig")
	before := proto.Clone(ev)
	if err := CheckHash(ev); err != nil {
		t.Fatalf("CheckHash: %v (the signature is not part of the hash)", err)
	}
	if !proto.Equal(before, ev) {
		t.Fatal("CheckHash changed the event")
	}
}
