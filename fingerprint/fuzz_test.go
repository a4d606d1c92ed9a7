package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzCompute feeds raw caller arguments to Compute. It must never panic;
// it refuses only with ErrInvalidArguments or ErrTooLarge; and when it
// accepts, the record is valid JSON, Compute is deterministic, and the
// canonical arguments are a fixed point (normalizing them again, under rules
// without secrets, gives the same record).
func FuzzCompute(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"a":1.0,"b":[1e0,10E-1]}`, `{"token":"hunter22","spec":{}}`,
		`{"\ud83d\ude00":"\u20ac"}`, `{"a":"\ud800"}`, `{"a":1,"a":2}`, `[1]`,
		`{"n":9007199254740993}`, `{"comment":"x","meta":{"trace":1}}`,
	} {
		f.Add([]byte(seed))
	}
	noSecrets := rulesWithoutSecrets()
	f.Fuzz(func(t *testing.T, raw []byte) {
		a := baseAction(string(raw))
		d, err := Compute(testKey, deployRules, a)
		if err != nil {
			if !errors.Is(err, ErrInvalidArguments) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !json.Valid(d.Record) {
			t.Fatalf("record is not valid JSON: %q", d.Record)
		}
		if c, err := jcs.Transform(d.Record); err != nil || !bytes.Equal(c, d.Record) {
			t.Fatalf("record is not RFC 8785 canonical (%v):\n%s\n%s", err, d.Record, c)
		}
		again, err := Compute(testKey, deployRules, a)
		if err != nil || !sameDigests(d, again) {
			t.Fatalf("not deterministic: %v", err)
		}

		open, err := Compute(testKey, noSecrets, a)
		if err != nil {
			t.Fatalf("accepted with secrets but refused without: %v", err)
		}
		args := recordArguments(t, open.Record)
		fixed, err := Compute(testKey, noSecrets, baseAction(args))
		if err != nil {
			t.Fatalf("canonical arguments %s refused: %v", args, err)
		}
		if !bytes.Equal(fixed.Record, open.Record) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", open.Record, fixed.Record)
		}
	})
}
