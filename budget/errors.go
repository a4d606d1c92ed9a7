package budget

import "errors"

// Errors returned by the decision functions, Apply and DecodeEvent. They are
// wrapped with context ("reserve \"op-1\": amount -5: invalid amount"); test
// with errors.Is. When a decision function returns an error, there is nothing
// to append.
var (
	// ErrUnknownAccount: the account has no limit yet (nil or never set).
	ErrUnknownAccount = errors.New("unknown account")

	// ErrBadAccount: an account name that cannot be a subject token (see
	// ValidAccountName).
	ErrBadAccount = errors.New("account names are 1-64 of A-Z a-z 0-9 _ -")

	// ErrMissingKey: the operation key is empty. Without it a retry cannot
	// be told from a new payment.
	ErrMissingKey = errors.New("missing operation key")

	// ErrInvalidAmount: an amount is zero, negative, above MaxAmount, or a
	// settlement is larger than the hold.
	ErrInvalidAmount = errors.New("invalid amount")

	// ErrOverflow: spent + held + requested (or spent + settled) does not
	// fit in an int64.
	ErrOverflow = errors.New("amount overflow")

	// ErrCurrency: the request's currency is not the account's, or a new
	// limit would change the account's currency.
	ErrCurrency = errors.New("currency mismatch")

	// ErrKeyReuse: the operation key is held or closed for a different
	// request (request digest or amount differs).
	ErrKeyReuse = errors.New("operation key reused for a different request")

	// ErrNotHeld: settle or release of an operation key with no open hold.
	ErrNotHeld = errors.New("operation key not held")

	// ErrAlreadyClosed: settle or release of an operation that was already
	// spent or released. A caller retrying a settlement whose answer was lost
	// may treat it as done after checking the account's Closed record.
	ErrAlreadyClosed = errors.New("operation already spent or released")

	// ErrLimitNotValid: the decision time is outside the limit's validity.
	// An override does not help: it overrides the amount, not the delegation.
	ErrLimitNotValid = errors.New("limit not valid at this time")

	// ErrTooManyHolds: the account already has MaxOpenHolds open holds.
	ErrTooManyHolds = errors.New("too many open holds")

	// ErrInvalidRequest: a malformed command (empty request digest, bad
	// limit record, override or evidence without its required fields,
	// strings too long or not valid UTF-8).
	ErrInvalidRequest = errors.New("invalid request")

	// ErrInvalidEvent: an event is malformed, internally inconsistent, or
	// cannot follow the account's state (wrong version, unknown hold, seen
	// state that is not the account's). Folding stops on it.
	ErrInvalidEvent = errors.New("invalid event")

	// ErrBrokenInvariant: an Account value violates its own invariants
	// (held total is not the sum of open holds, negative amounts). Accounts
	// built only by Apply never do; this catches hand-built or corrupted ones.
	ErrBrokenInvariant = errors.New("broken account invariant")
)
