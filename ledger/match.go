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
	// MatchExpire: the prior is DISPATCHED past its dispatch deadline with
	// no result. Record OUTCOME_UNKNOWN on it first (compare-and-set), then
	// match again: the retry gets the class recovery, never WAIT.
	MatchExpire
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

// MatchPrior applies the matching rule of docs/design.md §2. read_only tools are
// never matched.
//
// With an operation key, the key decides: a prior execution accepted
// within the contract's key retention absorbs the retry in any state
// (DELIVERED returns the stored result, NOT_EXECUTED resumes the same
// execution), and the same key with a different request is refused. A key
// never starts a second execution while its retention keeps the first.
//
// Without one, the fingerprint finds a prior execution inside the
// contract's match window; an attachable one absorbs the retry, a
// DELIVERED or NOT_EXECUTED one leaves room for a new execution.
//
// Either way a DISPATCHED prior is WAIT only before its dispatch deadline;
// after it, MatchExpire.
func MatchPrior(in MatchInput) Match {
	if in.Contract.Retry == contract.ReadOnly || in.Prior == nil {
		return Match{Kind: MatchNew}
	}
	p := in.Prior
	accepted := p.GetAcceptedAt().AsTime()
	if in.ByOperationKey {
		if !in.Contract.KeyRetention.Covers(accepted, in.Now) {
			return Match{Kind: MatchNew}
		}
		if p.GetRequestDigest() != in.RequestDigest {
			return Match{Kind: MatchRefuse, Reason: "operation key " + p.GetOperationKey() + " was used for a different request (" + p.GetExecutionId() + ")"}
		}
		return attachTo(p, in)
	}
	if !in.Contract.MatchWindow.Covers(accepted, in.Now) || !Attachable(p.GetState()) {
		return Match{Kind: MatchNew}
	}
	return attachTo(p, in)
}

// ReadOnlyKeyRefusal is why a call to a read_only tool that carries an
// operation key is refused before anything is recorded. A read_only call
// is never matched, so the key could not make a retry return the first
// answer, and recording it would leave a key that bound nothing: the same
// key with other arguments made a second execution, and later on a
// side-effecting tool a "new" operation. Refusing keeps one key one
// operation (docs/matching.md).
func ReadOnlyKeyRefusal(tool string) string {
	return "tool " + tool + " is read_only: its calls are recorded but never matched, so an operation key would bind nothing; send the call without one"
}

// attachTo is the recovery for a matched prior, with the dispatch deadline
// deciding between WAIT and expiry.
func attachTo(p *pb.Execution, in MatchInput) Match {
	if p.GetState() == pb.State_STATE_DISPATCHED {
		deadline := DispatchDeadline(p, in.Contract)
		if !in.Now.Before(deadline) {
			return Match{Kind: MatchExpire, Reason: "the dispatch deadline " + formatDeadline(deadline) + " passed with no result recorded"}
		}
		return Match{Kind: MatchAttach, Recovery: pb.Recovery_RECOVERY_WAIT,
			Reason: "the prior execution is in flight until " + formatDeadline(deadline) + " (its dispatch deadline); nothing was resent"}
	}
	rec, why := RecoveryFor(p.GetState(), in.Contract.Retry)
	return Match{Kind: MatchAttach, Recovery: rec, Reason: why}
}
