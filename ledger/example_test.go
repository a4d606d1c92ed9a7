package ledger_test

import (
	"fmt"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
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
