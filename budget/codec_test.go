package budget

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestEventJSONRoundTrip(t *testing.T) {
	b := workedExample(t)
	b.reserve("op-B", digestOf("A"), 12_000, cfo)
	for _, e := range b.events {
		raw, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEvent(raw)
		if err != nil {
			t.Fatalf("DecodeEvent(%s): %v", raw, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, e)
		}
	}
	raw, _ := MarshalEvent(b.events[len(b.events)-1])
	for _, field := range []string{`"within_limit":false`, `"allowed":true`, `"override":{"by":"cfo@example.org"`, `"held_list_seen":[{"operation_key":"op-A"`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("override decision lacks %s: %s", field, raw)
		}
	}
}

func TestDecodeEventRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          ``,
		"not an object":  `[]`,
		"unknown field":  `{"kind":"denied","account":"a","spent":1}`,
		"other case":     `{"Kind":"denied","account":"a"}`,
		"duplicate":      `{"kind":"denied","account":"a","amount":1,"amount":2}`,
		"nested dup":     `{"kind":"denied","account":"a","override":{"by":"x","by":"y"}}`,
		"trailing":       `{"kind":"denied","account":"a"} {}`,
		"unknown kind":   `{"kind":"spent","account":"a"}`,
		"no account":     `{"kind":"denied"}`,
		"fraction":       `{"kind":"denied","account":"a","amount":1.5}`,
		"too deep":       `{"kind":"denied","account":"a","held_list_seen":[[[[[[[[[]]]]]]]]]}`,
		"long key":       `{"kind":"denied","account":"a","operation_key":"` + strings.Repeat("k", MaxKeyBytes+1) + `"}`,
		"negative index": `{"kind":"denied","account":"a","account_version":-1}`,
	} {
		if _, err := DecodeEvent([]byte(in)); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// Evidence exported before 2026-12-05 had its target status as text: a
// number is read as the status, other text becomes the note's start.
func TestDecodeEventReadsTextStatus(t *testing.T) {
	line := `{"kind":"released","account":"acct-1","account_version":4,"currency":"GBP","limit":0,"operation_key":"op-A","request_digest":"sha256:x","amount":5,"spent_seen":0,"held_seen":0,"within_limit":false,"allowed":false,"evidence":{"execution_id":"act_1","target_status":"%s","note":"%s"}}`
	for _, tc := range []struct {
		status, note string
		want         Evidence
	}{
		{"404", "", Evidence{ExecutionID: "act_1", TargetStatus: 404}},
		{"target answered 502", "", Evidence{ExecutionID: "act_1", Note: "target answered 502"}},
		{"resolved_not_executed", "by alice", Evidence{ExecutionID: "act_1", Note: "resolved_not_executed; by alice"}},
	} {
		e, err := DecodeEvent([]byte(fmt.Sprintf(line, tc.status, tc.note)))
		if err != nil {
			t.Fatalf("%q: %v", tc.status, err)
		}
		if *e.Evidence != tc.want {
			t.Errorf("%q, %q: evidence %+v, want %+v", tc.status, tc.note, *e.Evidence, tc.want)
		}
	}
}
