package budget

import (
	"fmt"
	"time"
)

// ReserveRequest asks to hold an amount for one operation.
type ReserveRequest struct {
	// OperationKey identifies the intended operation. A retry keeps it; a
	// new payment, even with identical content, gets a new one.
	OperationKey string
	// RequestDigest is the digest of the request content. It tells a retry
	// from a key reused for a different request; it never identifies a retry
	// on its own.
	RequestDigest string
	// Amount to hold, in minor units (1..MaxAmount).
	Amount int64
	// Currency of Amount; "" means the account's.
	Currency string
	// Override, when set, allows a reservation beyond the limit. It is used
	// (and recorded) only when the request is not within the limit.
	Override *Override
}

// Outcome is what Reserve decided.
type Outcome string

// The outcomes of Reserve. Only OutcomeHeld and OutcomeDenied come with an
// event to append; the others answer a retry from the account as it is.
const (
	// OutcomeHeld: a new hold; Decision.Event is Reserved.
	OutcomeHeld Outcome = "held"
	// OutcomeDenied: beyond the limit and no override; Decision.Event is
	// Denied (recorded, opens no hold).
	OutcomeDenied Outcome = "denied"
	// OutcomeAlreadyHeld: a retry of an operation that holds; the existing
	// hold is returned and nothing is counted again.
	OutcomeAlreadyHeld Outcome = "already_held"
	// OutcomeSpent: a retry of an operation already settled.
	OutcomeSpent Outcome = "spent"
	// OutcomeReleased: a retry of an operation already released.
	OutcomeReleased Outcome = "released"
)

// Decision is Reserve's answer.
type Decision struct {
	// Event is the event to append, nil when nothing is appended (a retry).
	Event *Event
	// Outcome says what was decided.
	Outcome Outcome
	// Hold is the hold opened or found; for a denial, the one requested.
	Hold Hold
	// Closed is the earlier outcome for OutcomeSpent and OutcomeReleased.
	Closed *Closed
	// Total is spent + held + the amount counted by this decision: the
	// requested amount for a new decision, nothing for a retry.
	Total int64
	// Limit is the limit the decision was taken against.
	Limit int64
	// WithinLimit is Total <= Limit.
	WithinLimit bool
	// Allowed says whether a hold is open for the operation now: true for
	// OutcomeHeld and OutcomeAlreadyHeld, false for a denial and for a
	// closed operation (OutcomeSpent, OutcomeReleased).
	Allowed bool
	// Override is the override that allowed a reservation beyond the
	// limit, nil otherwise.
	Override *Override
	// Reason is ReasonLimitNotValid for a denial because the limit was not
	// in force; empty otherwise.
	Reason string
}

// Reserve decides a reservation on the account as read (a is not changed):
//
//   - key already held with the same request: the existing hold, no event;
//   - key already spent or released with the same request: that outcome, no
//     event;
//   - key held or closed for a different request: ErrKeyReuse;
//   - spent + held + amount <= limit: a Reserved event;
//   - beyond the limit with an override: a Reserved event that still says
//     within_limit=false and names the override;
//   - beyond the limit without one: a Denied event, which is appended too;
//   - the limit not in force (before valid_from, at or after valid_until):
//     a Denied event with Reason ReasonLimitNotValid, override or not.
//
// A denial does not bind the key: a later retry is decided afresh. Bad input
// returns an error and no event: ErrMissingKey, ErrInvalidAmount,
// ErrUnknownAccount, ErrCurrency, ErrOverflow, ErrTooManyHolds,
// ErrInvalidRequest.
func Reserve(a *Account, r ReserveRequest, now time.Time) (Decision, error) {
	if err := r.validate(); err != nil {
		return Decision{}, fmt.Errorf("reserve %q: %w", r.OperationKey, err)
	}
	if !a.known() {
		return Decision{}, fmt.Errorf("reserve %q: %w", r.OperationKey, ErrUnknownAccount)
	}
	if r.Currency != "" && r.Currency != a.Currency {
		return Decision{}, fmt.Errorf("reserve %q: request in %q, account %q is in %q: %w", r.OperationKey, r.Currency, a.Name, a.Currency, ErrCurrency)
	}
	if err := a.checkInvariants(); err != nil {
		return Decision{}, fmt.Errorf("reserve %q: %w", r.OperationKey, err)
	}
	if d, ok, err := a.retry(r); ok || err != nil {
		if err != nil {
			return Decision{}, fmt.Errorf("reserve %q: %w", r.OperationKey, err)
		}
		return d, nil
	}
	if len(a.Holds) >= MaxOpenHolds {
		return Decision{}, fmt.Errorf("reserve %q: account %q: %w", r.OperationKey, a.Name, ErrTooManyHolds)
	}
	total, ok := commitment(a.Spent, a.Held, r.Amount)
	if !ok {
		return Decision{}, fmt.Errorf("reserve %q: spent %d + held %d + amount %d: %w", r.OperationKey, a.Spent, a.Held, r.Amount, ErrOverflow)
	}
	within := total <= a.Limit
	hold := Hold{OperationKey: r.OperationKey, RequestDigest: r.RequestDigest, Amount: r.Amount}
	e := Event{
		Kind:           Reserved,
		Account:        a.Name,
		AccountVersion: a.Version,
		At:             now.UTC(),
		Currency:       a.Currency,
		Limit:          a.Limit,
		LimitDigest:    a.LimitDigest,
		OperationKey:   r.OperationKey,
		RequestDigest:  r.RequestDigest,
		Amount:         r.Amount,
		SpentSeen:      a.Spent,
		HeldSeen:       a.Held,
		HeldListSeen:   a.OpenHolds(),
		WithinLimit:    within,
		Allowed:        true,
	}
	d := Decision{Outcome: OutcomeHeld, Hold: hold, Total: total, Limit: a.Limit, WithinLimit: within, Allowed: true}
	switch {
	case !a.Terms().ValidAt(now):
		// Recorded like any denial, with the reason: the limit was not in
		// force, whatever the arithmetic says.
		e.Kind, e.Allowed, e.Reason = Denied, false, ReasonLimitNotValid
		d.Outcome, d.Allowed, d.Reason = OutcomeDenied, false, ReasonLimitNotValid
	case !within && r.Override != nil:
		o := *r.Override
		e.Override, d.Override = &o, &o
	case !within:
		e.Kind, e.Allowed = Denied, false
		d.Outcome, d.Allowed = OutcomeDenied, false
	}
	if err := e.Validate(); err != nil {
		return Decision{}, fmt.Errorf("reserve %q: built an invalid event: %w", r.OperationKey, err)
	}
	d.Event = &e
	return d, nil
}

// retry answers a request whose operation key is already held or closed.
// ok is false when the key is new.
func (a *Account) retry(r ReserveRequest) (d Decision, ok bool, err error) {
	var h Hold
	var closed *Closed
	if held, found := a.Holds[r.OperationKey]; found {
		h = held
	} else if c, found := a.Closed[r.OperationKey]; found {
		h, closed = c.Hold, &c
	} else {
		return Decision{}, false, nil
	}
	if h.RequestDigest != r.RequestDigest || h.Amount != r.Amount {
		return Decision{}, true, fmt.Errorf("operation is bound to request %s for %d, not %s for %d: %w",
			h.RequestDigest, h.Amount, r.RequestDigest, r.Amount, ErrKeyReuse)
	}
	total, fits := addChecked(a.Spent, a.Held)
	if !fits {
		return Decision{}, true, fmt.Errorf("spent %d + held %d: %w", a.Spent, a.Held, ErrOverflow)
	}
	d = Decision{Outcome: OutcomeAlreadyHeld, Hold: h, Closed: closed, Total: total, Limit: a.Limit, WithinLimit: total <= a.Limit, Allowed: true}
	if closed != nil {
		// The operation is closed: no hold is open for it now, so it must
		// not act (again) on this answer.
		d.Allowed = false
		d.Outcome = OutcomeSpent
		if closed.State == HoldReleased {
			d.Outcome = OutcomeReleased
		}
	}
	return d, true, nil
}

func (r ReserveRequest) validate() error {
	if r.OperationKey == "" {
		return ErrMissingKey
	}
	if err := checkIdent("operation key", r.OperationKey); err != nil {
		return fmt.Errorf("%s: %w", err, ErrInvalidRequest)
	}
	if err := checkIdent("request digest", r.RequestDigest); err != nil {
		return fmt.Errorf("%s: %w", err, ErrInvalidRequest)
	}
	if err := checkAmount("amount", r.Amount); err != nil {
		return err
	}
	if r.Override != nil {
		if err := r.Override.validate(); err != nil {
			return fmt.Errorf("%s: %w", err, ErrInvalidRequest)
		}
	}
	return nil
}
