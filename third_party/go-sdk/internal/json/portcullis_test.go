package json

import (
	"errors"
	"io"
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
		if errWant == nil && !equalJSON(got, want) {
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

func equalJSON(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
