package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
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

// Canonical returns the record as RFC 8785 canonical JSON: keys sorted
// (account, currency, delegator, limit, valid_from, valid_until), no white
// space, strings with only the escapes RFC 8785 requires, the limit as an
// integer (exact, since it is at most MaxAmount), times as RFC 3339 in UTC
// with the shortest fraction, or "" when open. It is meaningful only for a
// record that passes Validate; invalid UTF-8 is written as U+FFFD.
func (l Limit) Canonical() []byte {
	b := make([]byte, 0, 128+len(l.Account)+len(l.Delegator))
	b = append(b, `{"account":`...)
	b = appendJSONString(b, l.Account)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, l.Currency)
	b = append(b, `,"delegator":`...)
	b = appendJSONString(b, l.Delegator)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, l.Limit, 10)
	b = append(b, `,"valid_from":`...)
	b = appendJSONString(b, canonicalTime(l.ValidFrom))
	b = append(b, `,"valid_until":`...)
	b = appendJSONString(b, canonicalTime(l.ValidUntil))
	return append(b, '}')
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

// appendJSONString writes s as an RFC 8785 string: '"' and '\\' escaped,
// \b \f \n \r \t for those controls, \u00xx (lower-case hex) for the other
// controls below 0x20, everything else as literal UTF-8.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r) // invalid bytes arrive as U+FFFD
		}
	}
	return append(b, '"')
}
