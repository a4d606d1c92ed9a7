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

// appendCanonical gives what encoding/json + jcs give for decoded
// arguments: nested objects and arrays, numbers, escapes, and keys whose
// UTF-16 order differs from their UTF-8 order.
func TestCanonicalValueIsRFC8785(t *testing.T) {
	for _, raw := range []string{
		`{}`, `{"a":1,"b":[true,false,null,"x\n"],"c":{"z":1.5e300,"y":-0,"x":1e-7}}`,
		`{"\ue000":1,"😀":2,"\uffff":3,"a":4,"é":5,"":6,"\u0080":7}`,
		`{"amount":1000,"currency":"GBP","customer":"cus_4711","description":"order 7"}`,
		`{"n":[1,2.50,100000000000000000000,0.000001,4.5e21]}`,
		`{"deep":{"deeper":{"deepest":["\u2028","\u001f","\"\\/"]}}}`,
	} {
		checkCanonicalValue(t, raw)
	}
}

func FuzzCanonicalValue(f *testing.F) {
	f.Add(`{"a":[1,{"😀":"\ue000"}],"b":null}`)
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := decodeArguments([]byte(raw)); err == nil {
			checkCanonicalValue(t, raw)
		}
	})
}

func checkCanonicalValue(t *testing.T, raw string) {
	t.Helper()
	v, err := decodeArguments([]byte(raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	want, err := canonicalJSONSlow(v)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendCanonical(nil, v)
	if !ok || string(got) != string(want) {
		t.Fatalf("%s: appendCanonical = %s (%v), encoding/json + jcs = %s", raw, got, ok, want)
	}
}
