package ledger

import "errors"

// Errors the ledger returns. Adapters translate foreign errors into these
// once; the gateway maps them to Connect codes in one function.
var (
	// ErrConflict: the subject moved since the decision read it (the
	// compare-and-set failed). Catch up and decide again.
	ErrConflict = errors.New("conflict: the subject moved since it was read")
	// ErrAppendUnknown: the append may or may not have landed (timeout,
	// connection lost). Read the subject to learn which.
	ErrAppendUnknown = errors.New("append outcome unknown")
	// ErrNotFound: no such execution (or subject).
	ErrNotFound = errors.New("not found")
	// ErrNoContract: the tool has no contract and is refused.
	ErrNoContract = errors.New("tool has no contract")
	// ErrKeyReuse: an operation key was reused for a different request.
	ErrKeyReuse = errors.New("operation key reused for a different request")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrCorrupt: an event failed its hash or chain check.
	ErrCorrupt = errors.New("corrupt event")
	// ErrBadSignature: an event's signature (its own or its commit
	// group's) does not verify with its writer's enrolled keys; always
	// with ErrCorrupt.
	ErrBadSignature = errors.New("bad signature")
	// ErrUndecodable: a stored message is not an event at all; always with
	// ErrCorrupt.
	ErrUndecodable = errors.New("undecodable")
	// ErrUnenrolled: an event's writer is not an enrolled gateway.
	ErrUnenrolled = errors.New("writer not enrolled")
	// ErrKeysUnavailable: a writer's enrolled keys could not be read now;
	// retry (never quarantine on it: the verdict must not depend on timing).
	ErrKeysUnavailable = errors.New("enrolled keys unavailable")
	// ErrBudgetDenied: the execution's budget does not allow it.
	ErrBudgetDenied = errors.New("budget denied")
	// ErrContended: too many decision rounds lost to other writers.
	ErrContended = errors.New("too contended: decision rounds exhausted")
)

// ConflictError is an ErrConflict that names the subject and, when known,
// the subject's actual last sequence.
type ConflictError struct {
	Subject   string
	Expected  uint64
	ActualSeq uint64 // 0 when unknown
}

func (e *ConflictError) Error() string {
	return "conflict on " + e.Subject + ": the subject moved since it was read"
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }
