package ledger

import (
	"time"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// MatchKind is the outcome of matching a new request to a prior execution.
type MatchKind int

// Match outcomes.
const (
	MatchNew    MatchKind = iota + 1 // create a new execution
	MatchAttach                      // attach to the prior execution and recover as told
	MatchRefuse                      // operation key reused for a different request
)

// MatchInput is everything the matching rule reads.
type MatchInput struct {
	Contract contract.Contract
	// ByOperationKey is true when the caller supplied an operation key; the
	// key then decides matching and the request digest must agree.
	ByOperationKey bool
	RequestDigest  string
	// Prior is the latest execution for the key, nil when there is none.
	Prior *pb.Execution
	Now   time.Time
}

// Match is the decision of the matching rule.
type Match struct {
	Kind     MatchKind
	Recovery pb.Recovery
	Reason   string
}

// MatchPrior applies the matching rule of docs/design.md §2: read_only tools are
// never matched; a prior execution outside the contract's match window does
// not count; inside it, an operation key reused with a different request is
// refused, an attachable prior absorbs the retry with the recovery the table
// gives, and a final one leaves room for a new execution.
func MatchPrior(in MatchInput) Match {
	if in.Contract.Retry == contract.ReadOnly || in.Prior == nil {
		return Match{Kind: MatchNew}
	}
	p := in.Prior
	if !in.Contract.MatchWindow.Covers(p.GetAcceptedAt().AsTime(), in.Now) {
		return Match{Kind: MatchNew}
	}
	if in.ByOperationKey && p.GetRequestDigest() != in.RequestDigest {
		return Match{Kind: MatchRefuse, Reason: "operation key " + p.GetOperationKey() + " was used for a different request (" + p.GetExecutionId() + ")"}
	}
	if !Attachable(p.GetState()) {
		return Match{Kind: MatchNew}
	}
	rec, why := RecoveryFor(p.GetState(), in.Contract.Retry)
	return Match{Kind: MatchAttach, Recovery: rec, Reason: why}
}
