package budget

import (
	"fmt"
)

// Apply folds one event into the account. It accepts only an event that can
// follow: valid on its own (Validate), reading exactly the account's current
// version, and — for a decision — having seen exactly the account's limit,
// spent, held total and held list. Otherwise it returns an error wrapping
// ErrInvalidEvent (or ErrBrokenInvariant for a corrupted account) and leaves
// the account unchanged.
func (a *Account) Apply(e Event) error {
	if a == nil {
		return fmt.Errorf("apply %s: nil account: %w", e.Kind, ErrUnknownAccount)
	}
	if err := a.apply(e); err != nil {
		return fmt.Errorf("apply %s to %q at version %d: %w", e.Kind, e.Account, a.Version, err)
	}
	if err := a.checkInvariants(); err != nil {
		panic("budget: Apply broke an invariant: " + err.Error()) // a bug here, not bad input
	}
	return nil
}

func (a *Account) apply(e Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if err := a.checkInvariants(); err != nil {
		return err
	}
	if e.AccountVersion != a.Version {
		return invalidEvent("event read version %d, account is at %d", e.AccountVersion, a.Version)
	}
	if a.Version == 0 {
		if e.Kind != LimitSet {
			return invalidEvent("first event of an account must be limit_set: %w", ErrUnknownAccount)
		}
	} else {
		if e.Account != a.Name {
			return invalidEvent("event for account %q", e.Account)
		}
		if e.Currency != a.Currency {
			return invalidEvent("currency %q, account is in %q: %w", e.Currency, a.Currency, ErrCurrency)
		}
	}
	switch e.Kind {
	case LimitSet:
		a.setLimit(*e.LimitRecord, e.LimitDigest)
	case Reserved, Denied:
		if err := a.checkSeen(e); err != nil {
			return err
		}
		if e.Kind == Reserved {
			if len(a.Holds) >= MaxOpenHolds {
				return invalidEvent("%d holds already open: %w", len(a.Holds), ErrTooManyHolds)
			}
			held, ok := addChecked(a.Held, e.Amount)
			if !ok {
				return invalidEvent("held total: %w", ErrOverflow)
			}
			a.openHold(Hold{OperationKey: e.OperationKey, RequestDigest: e.RequestDigest, Amount: e.Amount}, held)
		}
	case Settled, Released:
		h, err := a.holdFor(e.OperationKey, e.RequestDigest)
		if err != nil {
			return invalidEvent("%s", err)
		}
		if len(e.HeldListSeen) > 0 { // records before 2026-12-05 carry none
			if e.SpentSeen != a.Spent || e.HeldSeen != a.Held || !a.HoldsAre(e.HeldListSeen) {
				return invalidEvent("%s saw spent %d held %d and its held list; the account has spent %d held %d", e.Kind, e.SpentSeen, e.HeldSeen, a.Spent, a.Held)
			}
		}
		spent, released := e.Amount, e.Remainder
		state := HoldSpent
		if e.Kind == Released {
			spent, released, state = 0, e.Amount, HoldReleased
		}
		if spent+released != h.Amount {
			return invalidEvent("moves %d spent + %d released, hold is %d", spent, released, h.Amount)
		}
		newSpent, ok := addChecked(a.Spent, spent)
		if !ok {
			return invalidEvent("spent total: %w", ErrOverflow)
		}
		a.closeHold(h, state, spent, released, *e.Evidence, newSpent)
	}
	a.Version++
	return nil
}

// checkSeen checks that a decision saw the account as it is and is not a
// second decision on an open or closed operation.
func (a *Account) checkSeen(e Event) error {
	if e.Limit != a.Limit || e.LimitDigest != a.LimitDigest {
		return invalidEvent("decision saw limit %d (%s), account has %d (%s)", e.Limit, e.LimitDigest, a.Limit, a.LimitDigest)
	}
	if e.SpentSeen != a.Spent || e.HeldSeen != a.Held {
		return invalidEvent("decision saw spent %d held %d, account has spent %d held %d", e.SpentSeen, e.HeldSeen, a.Spent, a.Held)
	}
	if !a.HoldsAre(e.HeldListSeen) {
		return invalidEvent("decision's held list is not the account's open holds")
	}
	if _, held := a.Holds[e.OperationKey]; held {
		return invalidEvent("operation %q is already held: a retry must not decide again", e.OperationKey)
	}
	if c, closed := a.Closed[e.OperationKey]; closed {
		return invalidEvent("operation %q is already %s: a retry must not decide again", e.OperationKey, c.State)
	}
	return nil
}

// holdFor returns the open hold of an operation, or why there is none.
func (a *Account) holdFor(key, digest string) (Hold, error) {
	h, ok := a.Holds[key]
	if !ok {
		if c, closed := a.Closed[key]; closed {
			return Hold{}, fmt.Errorf("operation %q is %s since version %d: %w", key, c.State, c.Version, ErrAlreadyClosed)
		}
		return Hold{}, fmt.Errorf("operation %q: %w", key, ErrNotHeld)
	}
	if digest != "" && h.RequestDigest != digest {
		return Hold{}, fmt.Errorf("operation %q is held for request %s, not %s: %w", key, h.RequestDigest, digest, ErrKeyReuse)
	}
	return h, nil
}
