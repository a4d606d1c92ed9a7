package fingerprint

import (
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// canonicalNumber returns the RFC 8785 spelling of the JSON number literal s
// and whether that spelling has exactly the value of s. RFC 8785 writes every
// number as the shortest form of an IEEE 754 double; a literal whose value is
// not that double (too many digits, out of range, underflow) would silently
// become a different number, and two different requests would share a
// fingerprint. Such literals are refused instead.
func canonicalNumber(s string) (string, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	c, err := jcs.NumberToJSON(f)
	if err != nil {
		return "", false
	}
	a, ok := parseDecimal(s)
	if !ok {
		return "", false
	}
	b, ok := parseDecimal(c)
	if !ok || a != b {
		return "", false
	}
	return c, true
}

// decimal is the exact value of a decimal literal: (-1)^neg × digits × 10^exp,
// with digits free of leading and trailing zeros. Zero is the zero decimal
// whatever its sign or spelling.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// parseDecimal reads a literal of the JSON number grammar (RFC 8259 §6),
// which the caller has already checked. It fails only on an exponent too
// large for an int, which no double can have anyway.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return decimal{}, true
	}
	exp := -len(frac)
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > 1<<30 || e < -(1<<30) {
			return decimal{}, false
		}
		exp += e
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	d.digits = trimmed
	d.exp = exp
	return d, true
}
