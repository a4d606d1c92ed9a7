package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// maxJSONDepth bounds nesting in DecodeEvent's input; an event nests at
// most three levels (event, held list, hold).
const maxJSONDepth = 8

// MarshalEvent encodes an event as JSON for export (the verifier's input and
// audit dumps). Field names are the json tags of Event; HTML characters are
// not escaped.
func MarshalEvent(e Event) ([]byte, error) {
	if err := e.checkShape(); err != nil {
		return nil, fmt.Errorf("marshal event: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("marshal event: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeEvent decodes one JSON event from outside. It is strict about the
// encoding — at most MaxEventBytes, one object, no unknown, duplicate or
// differently cased field names, no trailing data, strings and lists within
// their bounds — but does not judge the event: Validate, Apply and Verify do,
// so a verifier can read and report an inconsistent record. Errors wrap
// ErrInvalidEvent.
func DecodeEvent(data []byte) (Event, error) {
	if len(data) > MaxEventBytes {
		return Event{}, fmt.Errorf("decode event: %d bytes, more than %d: %w", len(data), MaxEventBytes, ErrInvalidEvent)
	}
	if err := checkFieldNames(data); err != nil {
		return Event{}, fmt.Errorf("decode event: %s: %w", err, ErrInvalidEvent)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("decode event: %s: %w", err, ErrInvalidEvent)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, fmt.Errorf("decode event: data after the event: %w", ErrInvalidEvent)
	}
	if err := e.checkShape(); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	if _, err := MarshalEvent(e); err != nil { // e.g. a time that cannot be written back
		return Event{}, fmt.Errorf("decode event: %s: %w", err, ErrInvalidEvent)
	}
	return e, nil
}

// fieldNames is every json field name of the event's types. encoding/json
// matches names case-insensitively and keeps the last duplicate; an audit
// record must have one reading, so DecodeEvent accepts only exact names,
// each at most once per object.
var fieldNames = func() map[string]bool {
	names := map[string]bool{}
	for _, v := range []any{Event{}, Limit{}, Hold{}, Override{}, Evidence{}} {
		t := reflect.TypeOf(v)
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				names[name] = true
			}
		}
	}
	return names
}()

// checkFieldNames walks the JSON tokens, refusing unknown spellings,
// duplicate names in one object, and nesting deeper than maxJSONDepth.
func checkFieldNames(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.object {
					top.key = true // the container is this key's value
				}
				if len(stack) == maxJSONDepth {
					return fmt.Errorf("nested deeper than %d", maxJSONDepth)
				}
				stack = append(stack, &frame{object: d == '{', seen: map[string]bool{}, key: true})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if top.key {
			name, _ := tok.(string)
			if !fieldNames[name] {
				return fmt.Errorf("unknown field %q", name)
			}
			if top.seen[name] {
				return fmt.Errorf("duplicate field %q", name)
			}
			top.seen[name] = true
			top.key = false
			continue
		}
		top.key = true // a scalar value ends the pair
	}
}
