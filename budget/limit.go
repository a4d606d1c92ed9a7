package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"
)

// Limit is the canonical limit record: the spending limit one party
// (Delegator) delegated to an account, in the account's currency and minor
// units. Its Digest identifies it in every decision taken under it.
type Limit struct {
	// Account names the account the limit applies to.
	Account string `json:"account"`
	// Currency is the ISO 4217 code of every amount on the account.
	Currency string `json:"currency"`
	// Limit is the most spent + held may reach, in minor units (0..MaxAmount).
	Limit int64 `json:"limit"`
	// ValidFrom is the first instant the limit applies; zero means open.
	ValidFrom time.Time `json:"valid_from,omitzero"`
	// ValidUntil is the first instant the limit no longer applies
	// (exclusive); zero means open.
	ValidUntil time.Time `json:"valid_until,omitzero"`
	// Delegator names who granted the limit.
	Delegator string `json:"delegator"`
}

// Validate reports whether the record can be set on an account. Errors wrap
// ErrInvalidRequest (or ErrInvalidAmount for the limit value).
func (l Limit) Validate() error {
	if err := checkIdent("account", l.Account); err != nil {
		return fmt.Errorf("limit: %s: %w", err, ErrInvalidRequest)
	}
	if err := checkCurrency(l.Currency); err != nil {
		return fmt.Errorf("limit: %s: %w", err, ErrInvalidRequest)
	}
	if l.Limit < 0 || l.Limit > MaxAmount {
		return fmt.Errorf("limit: %d is not in 0..%d: %w", l.Limit, MaxAmount, ErrInvalidAmount)
	}
	if err := checkIdent("delegator", l.Delegator); err != nil {
		return fmt.Errorf("limit: %s: %w", err, ErrInvalidRequest)
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"valid_from", l.ValidFrom}, {"valid_until", l.ValidUntil}} {
		if y := t.t.UTC().Year(); !t.t.IsZero() && (y < 1 || y > 9999) {
			return fmt.Errorf("limit: %s year %d is not in 1..9999: %w", t.name, y, ErrInvalidRequest)
		}
	}
	if !l.ValidFrom.IsZero() && !l.ValidUntil.IsZero() && !l.ValidUntil.After(l.ValidFrom) {
		return fmt.Errorf("limit: valid_until is not after valid_from: %w", ErrInvalidRequest)
	}
	return nil
}

// ValidAt reports whether t lies in [ValidFrom, ValidUntil).
func (l Limit) ValidAt(t time.Time) bool {
	if !l.ValidFrom.IsZero() && t.Before(l.ValidFrom) {
		return false
	}
	if !l.ValidUntil.IsZero() && !t.Before(l.ValidUntil) {
		return false
	}
	return true
}

// Canonical returns the record as RFC 8785 canonical JSON (keys account,
// currency, delegator, limit, valid_from, valid_until), made by
// github.com/gowebpki/jcs from the record's JSON: the limit is an integer
// (exact, since it is at most MaxAmount), times are RFC 3339 in UTC with the
// shortest fraction, or "" when open. It is meaningful only for a record
// that passes Validate; invalid UTF-8 is written as U+FFFD.
func (l Limit) Canonical() []byte {
	raw, err := json.Marshal(canonicalLimit{
		Account: l.Account, Currency: l.Currency, Delegator: l.Delegator, Limit: l.Limit,
		ValidFrom: canonicalTime(l.ValidFrom), ValidUntil: canonicalTime(l.ValidUntil),
	})
	if err != nil {
		panic("budget: marshal limit record: " + err.Error()) // strings and an int64 always marshal
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		panic("budget: canonicalize limit record: " + err.Error()) // encoding/json output is valid JSON
	}
	return out
}

// canonicalLimit is the limit record as it is digested.
type canonicalLimit struct {
	Account    string `json:"account"`
	Currency   string `json:"currency"`
	Delegator  string `json:"delegator"`
	Limit      int64  `json:"limit"`
	ValidFrom  string `json:"valid_from"`
	ValidUntil string `json:"valid_until"`
}

// Digest returns "sha256:" and the hex SHA-256 of Canonical. It is the
// limit_digest every decision under this limit records.
func (l Limit) Digest() string {
	sum := sha256.Sum256(l.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func canonicalTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
