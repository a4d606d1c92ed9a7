package ledger

import (
	"testing"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// recoveryTable is DESIGN.md §2's recovery table written out by hand, one
// row per prior state; byClass overrides any for the classes it names.
var recoveryTable = map[pb.State]struct {
	any     pb.Recovery
	byClass map[contract.RetryClass]pb.Recovery
}{
	sAccepted:  {any: pb.Recovery_RECOVERY_RESUME},
	sAuthd:     {any: pb.Recovery_RECOVERY_RESUME},
	sNotSent:   {any: pb.Recovery_RECOVERY_RESUME},
	sAwaiting:  {any: pb.Recovery_RECOVERY_AWAIT_APPROVAL},
	sDisp:      {any: pb.Recovery_RECOVERY_WAIT},
	sCompleted: {any: pb.Recovery_RECOVERY_RETURN_RESULT},
	sDenied:    {any: pb.Recovery_RECOVERY_RETURN_DENIAL},
	sUnknown: {byClass: map[contract.RetryClass]pb.Recovery{
		contract.IdempotencyKey: pb.Recovery_RECOVERY_RESEND_SAME_KEY,
		contract.StatusQuery:    pb.Recovery_RECOVERY_QUERY_STATUS,
		contract.Irreversible:   pb.Recovery_RECOVERY_NEEDS_REVIEW,
		// Not in the table (read_only is never matched); the code blocks
		// for review, the safe choice.
		contract.ReadOnly: pb.Recovery_RECOVERY_NEEDS_REVIEW,
	}},
	// Reached through an operation key only (a fingerprint starts anew).
	sDelivered:                 {any: pb.Recovery_RECOVERY_RETURN_RESULT},
	sNotExec:                   {any: pb.Recovery_RECOVERY_RESUME},
	pb.State_STATE_UNSPECIFIED: {any: pb.Recovery_RECOVERY_UNSPECIFIED},
}

func TestRecoveryFor(t *testing.T) {
	cases := 0
	for _, s := range append(allStates, pb.State_STATE_UNSPECIFIED) {
		row, ok := recoveryTable[s]
		if !ok {
			t.Fatalf("recoveryTable has no row for %s", s)
		}
		for _, class := range contract.RetryClasses {
			cases++
			want := row.any
			if r, ok := row.byClass[class]; ok {
				want = r
			}
			got, reason := RecoveryFor(s, class)
			if got != want {
				t.Errorf("RecoveryFor(%s, %s) = %s, want %s", s, class, got, want)
			}
			if got != pb.Recovery_RECOVERY_UNSPECIFIED && reason == "" {
				t.Errorf("RecoveryFor(%s, %s) = %s with an empty reason", s, class, got)
			}
			if got == pb.Recovery_RECOVERY_UNSPECIFIED && reason != "" {
				t.Errorf("RecoveryFor(%s, %s) gives a reason %q without a recovery", s, class, reason)
			}
		}
	}
	if cases != 44 {
		t.Fatalf("ran %d cases, want 11 states x 4 classes = 44", cases)
	}
}

// Every state an attach may be appended in (an operation key attaches in
// all of them) has a recovery; UNSPECIFIED has none.
func TestRecoveryForCoversEveryAttach(t *testing.T) {
	for _, s := range append(allStates, pb.State_STATE_UNSPECIFIED) {
		_, attachErr := Transition(s, pb.EventType_EVENT_TYPE_ATTACHED, contract.StatusQuery)
		for _, class := range contract.RetryClasses {
			got, _ := RecoveryFor(s, class)
			if (got != pb.Recovery_RECOVERY_UNSPECIFIED) != (attachErr == nil) {
				t.Errorf("RecoveryFor(%s, %s) = %s but attach error = %v", s, class, got, attachErr)
			}
		}
	}
}
