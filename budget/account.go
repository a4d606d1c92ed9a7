package budget

import (
	"fmt"
	"maps"
	"time"
)

// MaxAccountNameBytes is the longest account name.
const MaxAccountNameBytes = 64

// ValidAccountName reports whether name can name an account: 1 to
// MaxAccountNameBytes of A-Z a-z 0-9 _ -, so it is one subject token of the
// budget stream. The keeper checks it before every decision, and the
// execution ledger before it records a budget-bound execution, so a name
// taken from an agent's arguments is refused as bad input rather than
// recorded as a denial.
func ValidAccountName(name string) bool {
	if len(name) == 0 || len(name) > MaxAccountNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// HoldState is where an operation's reservation stands.
type HoldState string

// The states of a reservation. Only Settled and Released events leave
// HoldHeld; nothing returns to it.
const (
	HoldHeld     HoldState = "held"
	HoldSpent    HoldState = "spent"
	HoldReleased HoldState = "released"
)

// Closed is the outcome of an operation whose hold was moved: what was held,
// how much was spent and released, and the evidence. The account keeps it so
// a late retry of the operation gets its outcome instead of a new hold.
type Closed struct {
	Hold     Hold      // the hold as it was opened
	State    HoldState // HoldSpent or HoldReleased
	Spent    int64     // amount moved to spent (0 when released)
	Released int64     // amount released (the remainder when settled for less)
	Evidence Evidence  // why the hold was moved
	Version  uint64    // account version created by the closing event
}

// Account is the fold of one account's events: its limit, what is spent, what
// is held, and how each closed operation ended. Build it only with Apply (or
// Fold); the decision functions read it and never change it.
//
// Invariants (checked by Apply before and after each event): Held equals the
// sum of Holds; every hold is positive; Spent and Held are not negative; an
// operation key is never both open and closed.
type Account struct {
	// Name identifies the account; set by its first LimitSet.
	Name string
	// Currency is fixed by the first LimitSet.
	Currency string
	// Limit is the current limit in minor units.
	Limit int64
	// LimitDigest identifies the current limit record.
	LimitDigest string
	// ValidFrom and ValidUntil bound when the limit may be used (zero =
	// open; ValidUntil exclusive).
	ValidFrom, ValidUntil time.Time
	// Delegator granted the current limit.
	Delegator string
	// Spent is the total of confirmed effects.
	Spent int64
	// Held is the total of open holds.
	Held int64
	// Holds are the open holds by operation key.
	Holds map[string]Hold
	// Closed are the spent or released operations by operation key.
	Closed map[string]Closed
	// Version is the number of events folded: the version the next
	// decision reads and the expected version of the next append.
	Version uint64
}

// Fold builds an account from its events in order.
func Fold(events []Event) (*Account, error) {
	a := &Account{}
	for _, e := range events {
		if err := a.Apply(e); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Clone returns a deep copy, so a snapshot stays put while the original
// folds further events.
func (a *Account) Clone() *Account {
	c := *a
	c.Holds = maps.Clone(a.Holds)
	c.Closed = maps.Clone(a.Closed)
	return &c
}

// Terms returns the current limit record.
func (a *Account) Terms() Limit {
	return Limit{
		Account:    a.Name,
		Currency:   a.Currency,
		Limit:      a.Limit,
		ValidFrom:  a.ValidFrom,
		ValidUntil: a.ValidUntil,
		Delegator:  a.Delegator,
	}
}

// OpenHolds returns the open holds sorted by operation key (nil when none):
// the held list a decision records.
func (a *Account) OpenHolds() []Hold { return sortedHolds(a.Holds) }

// HoldsAre reports whether list is exactly OpenHolds(), without building
// it: every event a projector folds compares its held list, and on a busy
// account that list has tens of holds. A strictly sorted list as long as
// the open holds, each entry the open hold of its key, is the sorted list
// of the open holds.
func (a *Account) HoldsAre(list []Hold) bool {
	if len(list) != len(a.Holds) {
		return false
	}
	for i, h := range list {
		if i > 0 && list[i-1].OperationKey >= h.OperationKey {
			return false
		}
		if open, ok := a.Holds[h.OperationKey]; !ok || open != h {
			return false
		}
	}
	return true
}

// known reports whether the account has a limit.
func (a *Account) known() bool { return a != nil && a.Version > 0 && a.Name != "" }

// checkInvariants returns an ErrBrokenInvariant error when the account is
// not a possible fold of events.
func (a *Account) checkInvariants() error {
	if a.Spent < 0 || a.Held < 0 {
		return fmt.Errorf("account %q: negative spent %d or held %d: %w", a.Name, a.Spent, a.Held, ErrBrokenInvariant)
	}
	var sum int64
	for k, h := range a.Holds {
		if k != h.OperationKey || h.Amount <= 0 {
			return fmt.Errorf("account %q: hold %q malformed: %w", a.Name, k, ErrBrokenInvariant)
		}
		if _, closed := a.Closed[k]; closed {
			return fmt.Errorf("account %q: operation %q both held and closed: %w", a.Name, k, ErrBrokenInvariant)
		}
		var ok bool
		if sum, ok = addChecked(sum, h.Amount); !ok {
			return fmt.Errorf("account %q: held sum overflows: %w", a.Name, ErrBrokenInvariant)
		}
	}
	if sum != a.Held {
		return fmt.Errorf("account %q: held total %d, open holds sum to %d: %w", a.Name, a.Held, sum, ErrBrokenInvariant)
	}
	return nil
}

// The effects below change the account without checking; Apply checks
// first, Verify decides for itself.

func (a *Account) setLimit(l Limit, digest string) {
	a.Name = l.Account
	a.Currency = l.Currency
	a.Limit = l.Limit
	a.LimitDigest = digest
	a.ValidFrom = l.ValidFrom
	a.ValidUntil = l.ValidUntil
	a.Delegator = l.Delegator
}

func (a *Account) openHold(h Hold, held int64) {
	if a.Holds == nil {
		a.Holds = map[string]Hold{}
	}
	a.Holds[h.OperationKey] = h
	a.Held = held
}

func (a *Account) closeHold(h Hold, state HoldState, spent, released int64, ev Evidence, newSpent int64) {
	delete(a.Holds, h.OperationKey)
	a.Held -= h.Amount
	a.Spent = newSpent
	if a.Closed == nil {
		a.Closed = map[string]Closed{}
	}
	a.Closed[h.OperationKey] = Closed{Hold: h, State: state, Spent: spent, Released: released, Evidence: ev, Version: a.Version + 1}
}
