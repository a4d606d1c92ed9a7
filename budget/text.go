package budget

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// checkIdent checks an identifier: non-empty, at most MaxKeyBytes, valid
// UTF-8 without control characters (so it prints and round-trips as JSON).
func checkIdent(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if len(s) > MaxKeyBytes {
		return fmt.Errorf("%s is %d bytes, more than %d", field, len(s), MaxKeyBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s contains a control character", field)
		}
	}
	return nil
}

// checkText checks free text: at most MaxTextBytes of valid UTF-8, and
// non-empty when required.
func checkText(field, s string, required bool) error {
	if required && s == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if len(s) > MaxTextBytes {
		return fmt.Errorf("%s is %d bytes, more than %d", field, len(s), MaxTextBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

// checkCurrency checks an ISO 4217 alphabetic code: three letters A-Z.
func checkCurrency(c string) error {
	if len(c) != 3 {
		return fmt.Errorf("currency %q is not a three-letter ISO 4217 code", c)
	}
	for i := range 3 {
		if c[i] < 'A' || c[i] > 'Z' {
			return fmt.Errorf("currency %q is not a three-letter ISO 4217 code", c)
		}
	}
	return nil
}

// checkAmount checks a single amount: 1..MaxAmount.
func checkAmount(field string, v int64) error {
	if v <= 0 || v > MaxAmount {
		return fmt.Errorf("%s %d is not in 1..%d: %w", field, v, MaxAmount, ErrInvalidAmount)
	}
	return nil
}
