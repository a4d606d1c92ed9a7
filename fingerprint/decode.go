package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A value is the decoded form of JSON used throughout this package:
// map[string]any, []any, json.Number (already in RFC 8785 spelling), string,
// bool or nil.

// decodeArguments parses a caller's raw arguments into an object. Empty input
// is the empty object. It refuses, with ErrTooLarge or ErrInvalidArguments,
// anything that encoding/json would otherwise accept by quietly changing it:
// duplicate keys (last one wins), invalid UTF-8 and lone surrogate escapes
// (both become U+FFFD), and numbers RFC 8785 cannot write exactly.
func decodeArguments(raw []byte) (map[string]any, error) {
	if len(raw) > MaxArgumentsBytes {
		return nil, fmt.Errorf("arguments: %d bytes, limit is %d: %w", len(raw), MaxArgumentsBytes, ErrTooLarge)
	}
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(raw, 0)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w: %w", err, ErrInvalidArguments)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments: not a JSON object: %w", ErrInvalidArguments)
	}
	return obj, nil
}

// decodeJSON parses exactly one JSON value. depth is the nesting depth the
// value will sit at (0 for a top-level document); the result must not nest
// deeper than MaxDepth. Errors name a position or path, never a value.
func decodeJSON(raw []byte, depth int) (any, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	if v, err := scanJSON(raw, depth); err == nil {
		return v, nil
	}
	return decodeStd(raw, depth)
}

// decodeStd is decodeJSON by encoding/json's tokens: what decides (and
// explains) every input the scanner gives up on.
func decodeStd(raw []byte, depth int) (any, error) {
	d := decoder{dec: json.NewDecoder(bytes.NewReader(raw))}
	// UseNumber keeps each number's literal so that its exactness can be
	// checked before anything rounds it to a float64.
	d.dec.UseNumber()
	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	v, err := d.value(tok, depth, nil)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value (byte %d)", d.dec.InputOffset())
	}
	return v, nil
}

type decoder struct {
	dec *json.Decoder
}

// token reads the next token, turning encoding/json's errors into ones that
// say where the input broke.
func (d *decoder) token() (json.Token, error) {
	tok, err := d.dec.Token()
	if err == nil {
		return tok, nil
	}
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return nil, fmt.Errorf("invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("invalid JSON: unexpected end of input")
	default:
		return nil, fmt.Errorf("invalid JSON at byte %d: %v", d.dec.InputOffset(), err)
	}
}

// value decodes the value that starts with tok, found at path, whose
// enclosing containers nest depth deep.
func (d *decoder) value(tok json.Token, depth int, path []string) (any, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth+1 > MaxDepth {
			return nil, fmt.Errorf("nested deeper than %d levels at %s", MaxDepth, showPath(path))
		}
		switch t {
		case '{':
			return d.object(depth+1, path)
		case '[':
			return d.array(depth+1, path)
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %q at byte %d", rune(t), d.dec.InputOffset())
	case json.Number:
		c, ok := canonicalNumber(string(t))
		if !ok {
			return nil, fmt.Errorf("number at %s is not exactly representable in RFC 8785 JSON (IEEE 754 double); send it as a string", showPath(path))
		}
		return json.Number(c), nil
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("invalid JSON: unexpected token at byte %d", d.dec.InputOffset())
}

func (d *decoder) object(depth int, path []string) (map[string]any, error) {
	obj := map[string]any{}
	for d.dec.More() {
		tok, err := d.token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok { // encoding/json reports this itself; kept as a guard
			return nil, fmt.Errorf("invalid JSON: object key is not a string at %s", showPath(path))
		}
		if _, dup := obj[key]; dup {
			return nil, fmt.Errorf("duplicate key %s", showPath(append(path, key)))
		}
		tok, err = d.token()
		if err != nil {
			return nil, err
		}
		v, err := d.value(tok, depth, append(path, key))
		if err != nil {
			return nil, err
		}
		obj[key] = v
	}
	if _, err := d.token(); err != nil { // the closing '}'
		return nil, err
	}
	return obj, nil
}

func (d *decoder) array(depth int, path []string) ([]any, error) {
	arr := []any{}
	for d.dec.More() {
		tok, err := d.token()
		if err != nil {
			return nil, err
		}
		v, err := d.value(tok, depth, append(path, "["+strconv.Itoa(len(arr))+"]"))
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, err := d.token(); err != nil { // the closing ']'
		return nil, err
	}
	return arr, nil
}

// showPath renders a location for an error message: keys joined by dots,
// array indexes in brackets, quoted and shortened so that a hostile key
// cannot flood or forge a log line.
func showPath(path []string) string {
	if len(path) == 0 {
		return "top level"
	}
	var b strings.Builder
	for i, seg := range path {
		if i > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	s := b.String()
	const maxShown = 64
	if len(s) > maxShown {
		return fmt.Sprintf("%q...", s[:maxShown])
	}
	return strconv.Quote(s)
}

// checkSurrogates refuses \u escapes that encode half a UTF-16 surrogate
// pair. encoding/json would turn each into U+FFFD, so two different inputs
// would share a canonical form; RFC 8785 refuses them too. raw is valid
// UTF-8; syntax errors are left for the decoder to report.
func checkSurrogates(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(raw) {
				return nil
			}
			if raw[i+1] != 'u' {
				i++ // skip the escaped byte
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				return nil
			}
			i += 5 // now at the last hex digit
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Errorf("lone UTF-16 low surrogate escape at byte %d", i-5)
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := hex4(raw, i+3)
				if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Errorf("lone UTF-16 high surrogate escape at byte %d", i-5)
				}
				i += 6
			}
		}
	}
	return nil
}

// hex4 reads four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}
