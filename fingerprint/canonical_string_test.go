package fingerprint

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// canonicalString gives what canonicalJSON (encoding/json, then RFC 8785 by
// gowebpki/jcs) gives for every string: each ASCII byte, escapes, U+2028,
// U+2029, U+FFFD, astral characters, and fuzzed strings.
func TestCanonicalStringIsRFC8785(t *testing.T) {
	cases := []string{"", "plain", "a\"b\\c", "<>&", "\u2028\u2029", "\ufffd", "😀 ü é 中", "\x7f", "run:5f8097"}
	for c := 0; c < 0x80; c++ {
		cases = append(cases, "x"+string(rune(c))+"y", string(rune(c)))
	}
	cases = append(cases, strings.Repeat("\x01\"\\", 100))
	for _, s := range cases {
		checkCanonicalString(t, s)
	}
}

func FuzzCanonicalString(f *testing.F) {
	f.Add("a\nb\u2028\x00")
	f.Fuzz(func(t *testing.T, s string) {
		if utf8.ValidString(s) {
			checkCanonicalString(t, s)
		}
	})
}

func checkCanonicalString(t *testing.T, s string) {
	t.Helper()
	want, err := canonicalJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := canonicalString(nil, s); string(got) != string(want) {
		t.Fatalf("canonicalString(%q) = %s, canonicalJSON = %s", s, got, want)
	}
}
