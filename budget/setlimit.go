package budget

import (
	"fmt"
	"time"
)

// SetLimit returns the LimitSet event that creates the account (a nil or
// never set) or replaces its limit. The currency cannot change once set
// (ErrCurrency); a record for another account is ErrInvalidRequest. A lower
// limit is accepted even below what is already spent and held: later
// reservations are then denied until holds are released. A limit whose
// valid_until has already passed is refused (ErrInvalidRequest).
func SetLimit(a *Account, l Limit, now time.Time) (Event, error) {
	if err := l.Validate(); err != nil {
		return Event{}, fmt.Errorf("set limit: %w", err)
	}
	if !l.ValidUntil.IsZero() && !now.Before(l.ValidUntil) {
		return Event{}, fmt.Errorf("set limit: valid_until %s is not in the future (to stop spending on %q, set its limit to 0): %w",
			l.ValidUntil.UTC().Format(time.RFC3339), l.Account, ErrInvalidRequest)
	}
	var version uint64
	if a.known() {
		if l.Account != a.Name {
			return Event{}, fmt.Errorf("set limit: record for %q on account %q: %w", l.Account, a.Name, ErrInvalidRequest)
		}
		if l.Currency != a.Currency {
			return Event{}, fmt.Errorf("set limit on %q: currency %q, account is in %q: %w", a.Name, l.Currency, a.Currency, ErrCurrency)
		}
		version = a.Version
	} else if a != nil && a.Version != 0 {
		return Event{}, fmt.Errorf("set limit: account at version %d without a name: %w", a.Version, ErrBrokenInvariant)
	}
	rec := l
	e := Event{
		Kind:           LimitSet,
		Account:        l.Account,
		AccountVersion: version,
		At:             now.UTC(),
		Currency:       l.Currency,
		LimitRecord:    &rec,
		Limit:          l.Limit,
		LimitDigest:    l.Digest(),
	}
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("set limit: built an invalid event: %w", err)
	}
	return e, nil
}
