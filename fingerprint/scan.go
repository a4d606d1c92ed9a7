package fingerprint

import (
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// errSlowPath is scan's only error: the input is not one it decodes by
// itself, and decodeJSON's encoding/json path decides (and explains).
var errSlowPath = errors.New("fingerprint: decode with encoding/json")

// scanner decodes the JSON that arguments almost always are, without
// encoding/json's token machinery (which allocates an error for every
// scalar it reads). It accepts only what the encoding/json path accepts
// and gives the same value for it (FuzzScanAgrees); anything else — a
// syntax error, a duplicate key, too deep, an inexact number — makes it
// give up, and decodeJSON runs the encoding/json path, so every refusal
// and its message are that path's. Its input is valid UTF-8 without lone
// surrogate escapes (decodeJSON checks both first).
type scanner struct {
	data []byte
	off  int
}

func (s *scanner) space() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\n', '\r':
			s.off++
		default:
			return
		}
	}
}

// value decodes the value at s.off (no leading space), which sits in
// containers nested depth deep.
func (s *scanner) value(depth int) (any, error) {
	if s.off >= len(s.data) {
		return nil, errSlowPath
	}
	switch c := s.data[s.off]; {
	case c == '{':
		if depth+1 > MaxDepth {
			return nil, errSlowPath
		}
		return s.object(depth + 1)
	case c == '[':
		if depth+1 > MaxDepth {
			return nil, errSlowPath
		}
		return s.array(depth + 1)
	case c == '"':
		return s.string()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return true, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return nil, s.literal("null")
	}
	return nil, errSlowPath
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.off < len(lit) || string(s.data[s.off:s.off+len(lit)]) != lit {
		return errSlowPath
	}
	s.off += len(lit)
	return nil
}

func (s *scanner) object(depth int) (map[string]any, error) {
	s.off++ // '{'
	obj := map[string]any{}
	s.space()
	if s.off < len(s.data) && s.data[s.off] == '}' {
		s.off++
		return obj, nil
	}
	for {
		if s.off >= len(s.data) || s.data[s.off] != '"' {
			return nil, errSlowPath
		}
		key, err := s.string()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[key]; dup {
			return nil, errSlowPath
		}
		s.space()
		if s.off >= len(s.data) || s.data[s.off] != ':' {
			return nil, errSlowPath
		}
		s.off++
		s.space()
		v, err := s.value(depth)
		if err != nil {
			return nil, err
		}
		obj[key] = v
		if end, err := s.next('}'); err != nil || end {
			return obj, err
		}
	}
}

// next reads what follows a container's member: a comma (more members
// follow) or the container's closing byte (end).
func (s *scanner) next(closing byte) (end bool, err error) {
	s.space()
	if s.off >= len(s.data) {
		return false, errSlowPath
	}
	switch s.data[s.off] {
	case ',':
		s.off++
		s.space()
		return false, nil
	case closing:
		s.off++
		return true, nil
	}
	return false, errSlowPath
}

func (s *scanner) array(depth int) ([]any, error) {
	s.off++ // '['
	arr := []any{}
	s.space()
	if s.off < len(s.data) && s.data[s.off] == ']' {
		s.off++
		return arr, nil
	}
	for {
		v, err := s.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		if end, err := s.next(']'); err != nil || end {
			return arr, err
		}
	}
}

// string decodes the string at s.off (its opening quote).
func (s *scanner) string() (string, error) {
	start := s.off + 1
	i := start
	for i < len(s.data) {
		c := s.data[i]
		if c == '"' {
			s.off = i + 1
			return string(s.data[start:i]), nil
		}
		if c == '\\' {
			return s.escapedString(start)
		}
		if c < 0x20 {
			return "", errSlowPath
		}
		i++
	}
	return "", errSlowPath
}

// escapedString decodes a string with escapes, from its first byte.
func (s *scanner) escapedString(start int) (string, error) {
	out := make([]byte, 0, 2*(len(s.data)-start))
	i := start
	for i < len(s.data) {
		c := s.data[i]
		switch {
		case c == '"':
			s.off = i + 1
			return string(out), nil
		case c < 0x20:
			return "", errSlowPath
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s.data) {
			return "", errSlowPath
		}
		switch e := s.data[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s.data, i+2)
			if !ok {
				return "", errSlowPath
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// checkSurrogates let only a high surrogate escape followed
				// by a low one through; anything else is the slow path's.
				lo, ok := hex4(s.data, i+2)
				if i+1 >= len(s.data) || s.data[i] != '\\' || s.data[i+1] != 'u' || !ok {
					return "", errSlowPath
				}
				r = utf16.DecodeRune(r, lo)
				if r == utf8.RuneError {
					return "", errSlowPath
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", errSlowPath
		}
		i += 2
	}
	return "", errSlowPath
}

// number decodes a number in JSON's grammar, spelled as RFC 8785 writes it
// (canonicalNumber), or gives up when it is not exactly representable.
func (s *scanner) number() (any, error) {
	start, i := s.off, s.off
	digits := func() bool {
		j := i
		for i < len(s.data) && s.data[i] >= '0' && s.data[i] <= '9' {
			i++
		}
		return i > j
	}
	if s.data[i] == '-' {
		i++
	}
	if i < len(s.data) && s.data[i] == '0' {
		i++
	} else if !digits() {
		return nil, errSlowPath
	}
	if i < len(s.data) && s.data[i] == '.' {
		i++
		if !digits() {
			return nil, errSlowPath
		}
	}
	if i < len(s.data) && (s.data[i] == 'e' || s.data[i] == 'E') {
		i++
		if i < len(s.data) && (s.data[i] == '+' || s.data[i] == '-') {
			i++
		}
		if !digits() {
			return nil, errSlowPath
		}
	}
	c, ok := canonicalNumber(string(s.data[start:i]))
	if !ok {
		return nil, errSlowPath
	}
	s.off = i
	return json.Number(c), nil
}

// scanJSON decodes raw (one JSON value, depth as decodeJSON's) when the
// scanner can; errSlowPath otherwise.
func scanJSON(raw []byte, depth int) (any, error) {
	s := scanner{data: raw}
	s.space()
	v, err := s.value(depth)
	if err != nil {
		return nil, err
	}
	s.space()
	if s.off != len(raw) {
		return nil, errSlowPath
	}
	return v, nil
}
