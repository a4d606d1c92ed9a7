package budget

import (
	"fmt"
	"time"
)

// Settle returns the Settled event that moves an open hold to spent, after
// the effect was confirmed. amount is what was actually spent (1..held);
// settling for less releases the rest (Event.Remainder). The evidence must
// name the execution, and the target status or a note.
func Settle(a *Account, opKey string, amount int64, ev Evidence, now time.Time) (Event, error) {
	h, err := closable(a, opKey, ev, true)
	if err != nil {
		return Event{}, fmt.Errorf("settle %q: %w", opKey, err)
	}
	if err := checkAmount("amount", amount); err != nil {
		return Event{}, fmt.Errorf("settle %q: %w", opKey, err)
	}
	if amount > h.Amount {
		return Event{}, fmt.Errorf("settle %q: amount %d is more than the %d held: %w", opKey, amount, h.Amount, ErrInvalidAmount)
	}
	if _, ok := addChecked(a.Spent, amount); !ok {
		return Event{}, fmt.Errorf("settle %q: spent %d + amount %d: %w", opKey, a.Spent, amount, ErrOverflow)
	}
	return closing(a, Settled, h, amount, h.Amount-amount, ev, now)
}

// Release returns the Released event that ends an open hold without
// spending, once the effect's absence is proven. The evidence must name the
// target status or say in a note what proves it.
func Release(a *Account, opKey string, ev Evidence, now time.Time) (Event, error) {
	h, err := closable(a, opKey, ev, false)
	if err != nil {
		return Event{}, fmt.Errorf("release %q: %w", opKey, err)
	}
	return closing(a, Released, h, h.Amount, 0, ev, now)
}

// closable returns the open hold of opKey, checking the key, the evidence
// and the account.
func closable(a *Account, opKey string, ev Evidence, needExecution bool) (Hold, error) {
	if opKey == "" {
		return Hold{}, ErrMissingKey
	}
	if err := ev.validate(needExecution); err != nil {
		return Hold{}, fmt.Errorf("evidence: %s: %w", err, ErrInvalidRequest)
	}
	if !a.known() {
		return Hold{}, ErrUnknownAccount
	}
	if err := a.checkInvariants(); err != nil {
		return Hold{}, err
	}
	return a.holdFor(opKey, "")
}

func closing(a *Account, kind EventKind, h Hold, amount, remainder int64, ev Evidence, now time.Time) (Event, error) {
	evidence := ev
	e := Event{
		Kind:           kind,
		Account:        a.Name,
		AccountVersion: a.Version,
		At:             now.UTC(),
		Currency:       a.Currency,
		OperationKey:   h.OperationKey,
		RequestDigest:  h.RequestDigest,
		Amount:         amount,
		Remainder:      remainder,
		Evidence:       &evidence,
		SpentSeen:      a.Spent,
		HeldSeen:       a.Held,
		HeldListSeen:   a.OpenHolds(),
	}
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("%s %q: built an invalid event: %w", kind, h.OperationKey, err)
	}
	return e, nil
}
