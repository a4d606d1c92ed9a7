package budget

import (
	"errors"
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
