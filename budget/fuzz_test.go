package budget

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeEvent feeds outside bytes to DecodeEvent. It must never panic;
// it refuses only with ErrInvalidEvent; what it accepts re-encodes to a fixed
// point; and Validate, Apply and Verify take any accepted event without
// panicking (Apply refusing it with ErrInvalidEvent or accepting it).
func FuzzDecodeEvent(f *testing.F) {
	b := workedExample(f)
	b.reserve("op-B", digestOf("A"), 12_000, nil)
	b.reserve("op-B", digestOf("A"), 12_000, cfo)
	b.release("op-B")
	for _, e := range b.events {
		raw, err := MarshalEvent(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"kind":"denied","account":"a","amount":1,"amount":2}`))
	f.Add([]byte(`{"Kind":"reserved","account":"a"}`))
	seed := b.events
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := DecodeEvent(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		m1, err := MarshalEvent(e)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		e2, err := DecodeEvent(m1)
		if err != nil {
			t.Fatalf("re-encoded event refused: %v\n%s", err, m1)
		}
		if m2, _ := MarshalEvent(e2); !bytes.Equal(m1, m2) {
			t.Fatalf("not a fixed point:\n%s\n%s", m1, m2)
		}
		_ = e.Validate()
		if err := (&Account{}).Apply(e); err != nil && !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("Apply on a new account: %v", err)
		}
		a, _ := Fold(seed)
		if err := a.Apply(e); err != nil && !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("Apply after the worked example: %v", err)
		}
		Verify(append(append([]Event(nil), seed...), e, e))
	})
}
