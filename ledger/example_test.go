package ledger_test

import (
	"fmt"
	"time"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A retry that finds the prior execution's outcome unknown is told what to do
// by the tool's retry class.
func ExampleRecoveryFor() {
	for _, class := range []contract.RetryClass{contract.IdempotencyKey, contract.StatusQuery, contract.Irreversible} {
		rec, _ := ledger.RecoveryFor(pb.State_STATE_OUTCOME_UNKNOWN, class)
		fmt.Printf("%s: %s\n", class, rec)
	}
	// Output:
	// idempotency_key: RECOVERY_RESEND_SAME_KEY
	// status_query: RECOVERY_QUERY_STATUS
	// irreversible: RECOVERY_NEEDS_REVIEW
}

// One operation key is one operation: long after the result was delivered,
// a retry with the same key gets the stored result, while the same action
// without a key is a new execution.
func ExampleMatchPrior() {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := contract.Contract{Tool: "create_payment", Retry: contract.IdempotencyKey, MatchWindow: contract.MatchWindow{Duration: 10 * time.Minute}}
	prior := &pb.Execution{State: pb.State_STATE_DELIVERED, RequestDigest: "d1", AcceptedAt: timestamppb.New(now.Add(-30 * time.Hour))}
	byKey := ledger.MatchPrior(ledger.MatchInput{Contract: c, ByOperationKey: true, RequestDigest: "d1", Prior: prior, Now: now})
	byFingerprint := ledger.MatchPrior(ledger.MatchInput{Contract: c, RequestDigest: "d1", Prior: prior, Now: now})
	fmt.Println(byKey.Kind == ledger.MatchAttach, byKey.Recovery)
	fmt.Println(byFingerprint.Kind == ledger.MatchNew)

	// A dispatch past its deadline is not "in flight": expire it first.
	inFlight := &pb.Execution{State: pb.State_STATE_DISPATCHED, RequestDigest: "d1", AcceptedAt: timestamppb.New(now.Add(-time.Minute)),
		DispatchDeadline: timestamppb.New(now.Add(-time.Second))}
	fmt.Println(ledger.MatchPrior(ledger.MatchInput{Contract: c, ByOperationKey: true, RequestDigest: "d1", Prior: inFlight, Now: now}).Kind == ledger.MatchExpire)
	// Output:
	// true RECOVERY_RETURN_RESULT
	// true
	// true
}
