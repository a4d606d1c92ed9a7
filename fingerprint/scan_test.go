package fingerprint

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var scanSeeds = []string{
	`{}`, `[]`, `{"a":1}`, ` {"a" : [ 1 , 2.5e3 , -0 , true , false , null , "x" ] } `,
	`{"amount":1000,"currency":"GBP","customer":"cus_4711","description":"order 7"}`,
	`{"s":"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00\u0000"}`, `{"a":"é😀\u2028"}`,
	`{"n":[1,2.50,100000000000000000000,0.000001,4.5e21,1E+2,1e-2]}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":NaN}`,
	`{"a":tru}`, `{"a":nul}`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{,}`, `{"a":1}x`, `{} {}`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{"a":"\u12"}`,
	`{"a":"\ud800"}`, `{"a":"\udc00"}`, `{"a":"\ud800\u0041"}`, `{"id":9007199254740993}`, `{"x":1e400}`,
	`"str"`, `12`, `true`, `null`, ``, ` `, `{"a":[{"b":{"c":[]}}]}`, `{"a":"unterminated`,
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	"{\"a\":\t\r\n1}", "{\"a\":1\v}", `{"a":"x"}` + "\u00a0",
}

// The scanner accepts only what the encoding/json path accepts, with the
// same value: where the scanner gives up, that path decides.
func TestScanAgrees(t *testing.T) {
	for _, raw := range scanSeeds {
		checkScanAgrees(t, raw)
	}
	// The scanner handles the usual arguments itself.
	for _, raw := range scanSeeds[:8] {
		if _, err := scanJSON([]byte(raw), 0); err != nil {
			t.Errorf("scanJSON(%s) gave up", raw)
		}
	}
}

func FuzzScanAgrees(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkScanAgrees(t, raw)
	})
}

func checkScanAgrees(t *testing.T, raw string) {
	t.Helper()
	if !utf8.ValidString(raw) || checkSurrogates([]byte(raw)) != nil {
		return // decodeJSON refuses these before either decoder
	}
	for _, depth := range []int{0, MaxDepth - 1} {
		got, err := scanJSON([]byte(raw), depth)
		if err != nil {
			continue
		}
		want, werr := decodeStd([]byte(raw), depth)
		if werr != nil {
			t.Fatalf("depth %d: scanner accepts %q, encoding/json refuses it: %v", depth, raw, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("depth %d: %q: scanner %#v, encoding/json %#v", depth, raw, got, want)
		}
	}
}
