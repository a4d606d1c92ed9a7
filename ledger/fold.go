package ledger

import (
	"bytes"
	"fmt"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// CheckNext asserts that next may follow prev (nil when next is the first
// event) on one subject: its hash is right, it links to prev's hash, and for
// an execution's subject the record it carries follows from prev's by a
// legal transition. The projector calls it on every event it folds; the
// Service calls it before every append.
func CheckNext(prev, next *pb.Event) error {
	if err := CheckHash(next); err != nil {
		return err
	}
	return CheckFollows(prev, next)
}

// CheckFollows is CheckNext without the hash check, for a caller that has
// just checked next's hash (CheckSigned) or set it (Seal): it links to
// prev's hash, and for an execution's subject the record it carries
// follows from prev's by a legal transition.
func CheckFollows(prev, next *pb.Event) error {
	if !bytes.Equal(next.GetPrevHash(), prev.GetHash()) {
		return fmt.Errorf("%w: event %s on %s: chain broken (prev_hash does not match the previous event)", ErrCorrupt, next.GetEventId(), next.GetSubject())
	}
	ch := next.GetExecutionChanged()
	if ch == nil {
		return fmt.Errorf("%w: event %s: no body for %s", ErrCorrupt, next.GetEventId(), next.GetType())
	}
	x := ch.GetExecution()
	if x.GetExecutionId() != next.GetExecutionId() {
		return fmt.Errorf("%w: event %s carries execution %s", ErrCorrupt, next.GetEventId(), x.GetExecutionId())
	}
	if _, rest, ok := SubjectLane(next.GetSubject()); !ok || rest != x.GetIntentToken()+"."+x.GetExecutionId() {
		return fmt.Errorf("%w: event %s on %s carries execution %s of intent %s", ErrCorrupt, next.GetEventId(), next.GetSubject(), x.GetExecutionId(), x.GetIntentToken())
	}
	if prev == nil {
		return checkFirst(next, x)
	}
	px := prev.GetExecutionChanged().GetExecution()
	if err := checkImmutable(px, x); err != nil {
		return fmt.Errorf("%w: event %s: %v", ErrCorrupt, next.GetEventId(), err)
	}
	from := px.GetState()
	to, err := Transition(from, next.GetType(), classOf(px.GetRetryClass()))
	if err != nil {
		return fmt.Errorf("%w: event %s: %v", ErrCorrupt, next.GetEventId(), err)
	}
	if to != x.GetState() {
		return fmt.Errorf("%w: event %s: %s from %s leads to %s, record says %s", ErrCorrupt, next.GetEventId(), next.GetType(), from, to, x.GetState())
	}
	return nil
}

// checkFirst asserts that an execution starts with ACCEPTED (into ACCEPTED
// or AWAITING_APPROVAL) or with ACCEPTED_DISPATCHED, which is ACCEPTED and
// DISPATCHED in one event: into DISPATCHED, with the first dispatch's time,
// count and deadline recorded as a DISPATCHED event records them.
func checkFirst(next *pb.Event, x *pb.Execution) error {
	switch next.GetType() {
	case pb.EventType_EVENT_TYPE_ACCEPTED:
		if s := x.GetState(); s == pb.State_STATE_ACCEPTED || s == pb.State_STATE_AWAITING_APPROVAL {
			return nil
		}
	case pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED:
		if x.GetState() == pb.State_STATE_DISPATCHED && x.GetDispatchCount() == 1 && x.GetDispatchedAt() != nil && x.GetDispatchDeadline() != nil {
			return nil
		}
		return fmt.Errorf("%w: event %s: ACCEPTED_DISPATCHED must carry a first dispatch (DISPATCHED, count 1, dispatched_at and deadline), got %s, count %d",
			ErrCorrupt, next.GetEventId(), x.GetState(), x.GetDispatchCount())
	}
	return fmt.Errorf("%w: event %s: an execution must start with ACCEPTED or ACCEPTED_DISPATCHED, got %s into %s", ErrCorrupt, next.GetEventId(), next.GetType(), x.GetState())
}

var classes = map[pb.RetryClass]contract.RetryClass{
	pb.RetryClass_RETRY_CLASS_READ_ONLY:       contract.ReadOnly,
	pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY: contract.IdempotencyKey,
	pb.RetryClass_RETRY_CLASS_STATUS_QUERY:    contract.StatusQuery,
	pb.RetryClass_RETRY_CLASS_IRREVERSIBLE:    contract.Irreversible,
}

func classOf(c pb.RetryClass) contract.RetryClass { return classes[c] }

// ClassProto converts a contract's retry class to its wire enum.
func ClassProto(c contract.RetryClass) pb.RetryClass {
	for k, v := range classes {
		if v == c {
			return k
		}
	}
	return pb.RetryClass_RETRY_CLASS_UNSPECIFIED
}

// checkImmutable asserts that what was decided at acceptance never changes
// along an execution's chain.
func checkImmutable(prev, next *pb.Execution) error {
	switch {
	case prev.GetExecutionId() != next.GetExecutionId(), prev.GetIntentToken() != next.GetIntentToken():
		return fmt.Errorf("execution id changed from %s to %s", prev.GetExecutionId(), next.GetExecutionId())
	case prev.GetRetryClass() != next.GetRetryClass():
		return fmt.Errorf("retry class changed from %s to %s", prev.GetRetryClass(), next.GetRetryClass())
	case prev.GetFingerprint() != next.GetFingerprint(), prev.GetRequestDigest() != next.GetRequestDigest(),
		prev.GetCanonicalRecord() != next.GetCanonicalRecord(), prev.GetOperationKey() != next.GetOperationKey():
		return fmt.Errorf("the action's identity changed")
	case prev.GetActor() != next.GetActor(), prev.GetTool() != next.GetTool(), prev.GetTarget() != next.GetTarget():
		return fmt.Errorf("actor, tool or target changed")
	case !prev.GetAcceptedAt().AsTime().Equal(next.GetAcceptedAt().AsTime()):
		return fmt.Errorf("accepted_at changed")
	}
	return nil
}
