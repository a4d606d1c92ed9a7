package json

import (
	stdjson "encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// The patch (PORTCULLIS.md): Unmarshal decodes from its input without a
// Decoder's 32 KiB read buffer, and answers as Decode did.

func TestUnmarshalDoesNotAllocateAReadBuffer(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy_release","arguments":{"release_id":"r-1"}}}`)
	var v struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	const runs = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		if err := Unmarshal(msg, &v); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4<<10 {
		t.Errorf("Unmarshal of a %d-byte message allocated %d bytes a call; want well under the Decoder's 32 KiB buffer", len(msg), per)
	}
	if v.Method != "tools/call" || v.Params.Name != "deploy_release" {
		t.Errorf("decoded %+v", v)
	}
}

func TestUnmarshalAnswersAsDecode(t *testing.T) {
	for _, in := range []string{"", "  \n\t", `{"a":1}`, `{"a":1} trailing`, `{"a":`, `{"a":x}`, `[1,2]`, `"s"`, `{"A":2}`} {
		var got, want map[string]any
		errGot := Unmarshal([]byte(in), &got)
		errWant := NewDecoder(strings.NewReader(in)).Decode(&want)
		if (errGot == nil) != (errWant == nil) {
			t.Errorf("%q: Unmarshal error %v, Decode error %v", in, errGot, errWant)
			continue
		}
		if errWant == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: Unmarshal %v, Decode %v", in, got, want)
		}
	}
	if err := Unmarshal(nil, new(any)); !errors.Is(err, io.EOF) {
		t.Errorf("empty input: %v, want io.EOF as Decode", err)
	}
	var s struct {
		A int `json:"a"`
	}
	if err := Unmarshal([]byte(`{"A":2}`), &s); err != nil || s.A != 0 {
		t.Errorf("case-insensitive field matched: %+v, %v", s, err)
	}
	deep := strings.Repeat("[", defaultMaxDepth+1) + strings.Repeat("]", defaultMaxDepth+1)
	if err := Unmarshal([]byte(deep), new(any)); !errors.Is(err, errMaxDepthExceeded) {
		t.Errorf("too deep: %v", err)
	}
}

// FuzzUnmarshalAgreesWithDecode: on any input the patched Unmarshal and a
// Decoder over the same bytes (v1.8.0's Unmarshal) agree on whether it
// decodes and, when it does, on the value, into a map and into a struct
// shaped like a JSON-RPC message.
func FuzzUnmarshalAgreesWithDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2.5,"s",null,true]}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"ok"}]}}`,
		`[{"jsonrpc":"2.0","method":"ping"}]`, `  {"A":1} {"b":2}`, `{"a":"\u00e9\ud83d\ude00"}`, `{"a":`, ``, ` `, `nul`, `1e400`,
	} {
		f.Add([]byte(s))
	}
	type message struct {
		JSONRPC string             `json:"jsonrpc"`
		ID      any                `json:"id"`
		Method  string             `json:"method"`
		Params  map[string]any     `json:"params"`
		Result  stdjson.RawMessage `json:"result"`
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newV := range []func() any{func() any { return new(any) }, func() any { return new(message) }} {
			got, want := newV(), newV()
			errGot := Unmarshal(data, got)
			errWant := checkMaxDepth(data, defaultMaxDepth)
			if errWant == nil {
				errWant = NewDecoder(strings.NewReader(string(data))).Decode(want)
			}
			if (errGot == nil) != (errWant == nil) {
				t.Fatalf("%q into %T: Unmarshal error %v, Decode error %v", data, got, errGot, errWant)
			}
			if errGot == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%q into %T: Unmarshal %#v, Decode %#v", data, got, got, want)
			}
		}
	})
}
