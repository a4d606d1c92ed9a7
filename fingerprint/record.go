package fingerprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Action is what a caller asks to do. Every field is part of the canonical
// action record, so a change to any of them is a different action.
type Action struct {
	Actor         string // who asks (agent identity)
	Tool          string // tool name; its contract supplies the rules
	Channel       string // how the tool reaches the target (e.g. "http", "ssh")
	Target        string // what the action touches (URL, host)
	CredentialRef string // name of the credential used, never the credential
	Method        string // verb at the target (e.g. "POST")
	// Arguments is the caller's raw JSON; it must be a JSON object or empty
	// (empty means {}), at most MaxArgumentsBytes and MaxDepth deep.
	Arguments []byte
	// IntentScope is the context in which a retry is plausible
	// ("run:5f8097"). It is in the fingerprint but not in the request digest.
	IntentScope string
}

// Keys of the canonical action record (docs/design.md §1).
const (
	fieldActor         = "actor"
	fieldTool          = "tool"
	fieldChannel       = "channel"
	fieldTarget        = "target"
	fieldCredentialRef = "credential_ref"
	fieldMethod        = "method"
	fieldArguments     = "arguments"
	fieldIntentScope   = "intent_scope"
)

type stringField struct{ key, value string }

// stringFields are the record's members other than the arguments.
func (a Action) stringFields() []stringField {
	return []stringField{
		{fieldActor, a.Actor},
		{fieldTool, a.Tool},
		{fieldChannel, a.Channel},
		{fieldTarget, a.Target},
		{fieldCredentialRef, a.CredentialRef},
		{fieldMethod, a.Method},
		{fieldIntentScope, a.IntentScope},
	}
}

// validate refuses a string field that is not valid UTF-8: encoding would
// replace its bad bytes with U+FFFD and merge distinct values.
func (a Action) validate() error {
	for _, f := range a.stringFields() {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("action: %s is not valid UTF-8: %w", f.key, ErrInvalidAction)
		}
	}
	return nil
}

// records returns the canonical action record for a with the normalized
// args, and the same record without intent_scope (for the request digest).
//
// The arguments go through canonicalJSON once; the record's own members are
// then written in key order. Its keys are fixed ASCII names, for which byte
// order is RFC 8785's UTF-16 order, so the result is exactly what
// canonicalJSON would give for the whole record (the tests check this)
// without canonicalizing up to 64 KiB of arguments twice.
func (a Action) records(args map[string]any) (full, request []byte, err error) {
	argsJSON, err := canonicalJSON(args)
	if err != nil {
		return nil, nil, err
	}
	fields := a.stringFields()
	members := make([]recordMember, 0, 1+len(fields))
	members = append(members, recordMember{key: fieldArguments, value: argsJSON})
	for _, f := range fields {
		members = append(members, recordMember{key: f.key, value: canonicalString(make([]byte, 0, len(f.value)+2), f.value)})
	}
	slices.SortFunc(members, func(x, y recordMember) int { return strings.Compare(x.key, y.key) })
	return assemble(members, ""), assemble(members, fieldIntentScope), nil
}

// recordMember is one member of the record, its value canonical JSON.
type recordMember struct {
	key   string
	value []byte
}

// assemble writes the members, sorted by key, as one JSON object, leaving
// out the member named skip.
func assemble(members []recordMember, skip string) []byte {
	n := 2
	for _, m := range members {
		n += len(m.key) + len(m.value) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for _, m := range members {
		if m.key == skip {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"', ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

// canonicalString appends s (valid UTF-8) as an RFC 8785 string: the
// ECMAScript serialization, which escapes only '"', '\\' and the control
// characters below U+0020 (the short forms where JSON has them, else
// \u00xx in lowercase hex) and writes everything else as it is. It gives
// what canonicalJSON gives for a string (the tests check it) without an
// encode and a parse per field.
func canonicalString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// canonicalJSON serializes a decoded value as RFC 8785 canonical JSON.
//
// RFC 8785 is done by github.com/gowebpki/jcs rather than by hand: it is a
// well-kept implementation of the RFC (the reference code's maintained fork)
// and gets the hard parts right, ES6 number formatting and ordering of keys
// by UTF-16 code units, which a sort of Go strings (UTF-8 bytes) does not.
// encoding/json only produces the input it reads; every value here has been
// checked on decoding, so a failure is a bug, not bad input.
func canonicalJSON(v any) ([]byte, error) {
	if out, ok := appendCanonical(nil, v); ok {
		return out, nil
	}
	return canonicalJSONSlow(v)
}

// appendCanonical writes a decoded value (what decodeJSON gives: objects,
// arrays, strings, canonical json.Numbers, booleans, null) as RFC 8785 JSON
// directly: members in the order of their keys' UTF-16 code units, strings
// by canonicalString, numbers as decodeJSON already spelled them. It says
// false for anything else, which canonicalJSONSlow then serializes. The
// tests check that both give the same bytes.
func appendCanonical(dst []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		if t {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case string:
		return canonicalString(dst, t), true
	case json.Number:
		if c, ok := canonicalNumber(string(t)); ok && c == string(t) {
			return append(dst, t...), true
		}
		return dst, false
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendCanonical(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			if !utf8.ValidString(k) {
				return dst, false
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonicalString(dst, k)
			dst = append(dst, ':')
			var ok bool
			if dst, ok = appendCanonical(dst, t[k]); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 3.2.3).
// UTF-8 byte order is the same except where a character above U+FFFF meets
// one from U+E000 to U+FFFF: those are compared as UTF-16.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpUnit(firstUnit(ra), firstUnit(rb), ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		r1, _ := utf16.EncodeRune(r)
		return r1
	}
	return r
}

func cmpUnit(ua, ub, ra, rb rune) int {
	if ua != ub {
		return int(ua - ub)
	}
	// Same high surrogate: the low surrogates order as the code points do.
	return int(ra - rb)
}

func canonicalJSONSlow(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("fingerprint: encode record: %w", err)
	}
	out, err := jcs.Transform(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("fingerprint: canonicalize record: %w", err)
	}
	return out, nil
}
