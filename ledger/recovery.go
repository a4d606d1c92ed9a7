package ledger

import (
	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// RecoveryFor is the recovery table of DESIGN.md §2: what the caller of an
// attached Begin must do, given the prior execution's state and the tool's
// retry class, and a sentence saying why nothing was resent. DELIVERED and
// NOT_EXECUTED are reached only through an operation key. A DISPATCHED
// prior past its dispatch deadline is expired first (MatchPrior says so),
// so WAIT here always means "before the deadline".
func RecoveryFor(s pb.State, class contract.RetryClass) (pb.Recovery, string) {
	switch s {
	case pb.State_STATE_ACCEPTED, pb.State_STATE_AUTHORIZED:
		return pb.Recovery_RECOVERY_RESUME, "the prior execution was accepted but not dispatched; continue it (dispatch still needs the compare-and-set win)"
	case pb.State_STATE_NOT_SENT:
		return pb.Recovery_RECOVERY_RESUME, "the prior execution is known not to have left the process; continue it"
	case pb.State_STATE_AWAITING_APPROVAL:
		return pb.Recovery_RECOVERY_AWAIT_APPROVAL, "the prior execution is waiting for approval; no second approval was opened"
	case pb.State_STATE_DISPATCHED:
		return pb.Recovery_RECOVERY_WAIT, "the prior execution is in flight; nothing was resent"
	case pb.State_STATE_OUTCOME_UNKNOWN:
		switch class {
		case contract.IdempotencyKey:
			return pb.Recovery_RECOVERY_RESEND_SAME_KEY, "the outcome is unknown; the target honours Idempotency-Key, so resend with the same key"
		case contract.StatusQuery:
			return pb.Recovery_RECOVERY_QUERY_STATUS, "the outcome is unknown; ask the target's status before anything else"
		default:
			return pb.Recovery_RECOVERY_NEEDS_REVIEW, "the outcome is unknown and the action is irreversible; a person must resolve it"
		}
	case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED:
		return pb.Recovery_RECOVERY_RETURN_RESULT, "the target already answered; the stored result is returned and nothing was sent"
	case pb.State_STATE_DENIED:
		return pb.Recovery_RECOVERY_RETURN_DENIAL, "the prior execution was denied; the denial is returned and no new approval was opened"
	case pb.State_STATE_DELIVERED:
		return pb.Recovery_RECOVERY_RETURN_RESULT, "the operation key's execution already completed and its result was delivered; the stored result is returned and nothing was sent"
	case pb.State_STATE_NOT_EXECUTED:
		return pb.Recovery_RECOVERY_RESUME, "the operation key's execution was proven not to have run at the target; dispatch the same execution again (same Idempotency-Key)"
	}
	return pb.Recovery_RECOVERY_UNSPECIFIED, ""
}
