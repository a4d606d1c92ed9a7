package fingerprint

import (
	"errors"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/contract"
)

func TestNormalize(t *testing.T) {
	none := contract.FingerprintRules{}
	tests := []struct {
		name  string
		rules contract.FingerprintRules
		args  string
		want  string // canonical arguments; keyed digests shown as <secret>
	}{
		{"empty is the empty object", none, ``, `{}`},
		{"empty object", none, ` { } `, `{}`},
		{"keys sorted, whitespace dropped", none, "{ \"b\" : 1,\n\t\"a\" : [true, false, null] }", `{"a":[true,false,null],"b":1}`},
		{"keys sorted by UTF-16 code units", none, `{"\ud83d\ude00":1,"\uffff":2,"a":3}`, "{\"a\":3,\"\U0001F600\":1,\"\uffff\":2}"},
		{"number spellings", none, `{"a":1.0,"b":1e0,"c":10E-1,"d":0.1e1,"e":-0,"f":4.50,"g":2e-3,"h":1e21,"i":1E+30,"j":0.000001,"k":1e-7}`,
			`{"a":1,"b":1,"c":1,"d":1,"e":0,"f":4.5,"g":0.002,"h":1e+21,"i":1e+30,"j":0.000001,"k":1e-7}`},
		{"largest exact integer", none, `{"n":9007199254740992}`, `{"n":9007199254740992}`},
		{"string escapes canonical", none, `{"s":"\u20ac\/\u000F\u0042\"\\"}`, `{"s":"€/\u000fB\"\\"}`},
		{"html not escaped", none, `{"s":"<a&b>"}`, `{"s":"<a&b>"}`},
		{"arrays keep order", none, `{"a":[3,1,2,{"z":1,"y":2}]}`, `{"a":[3,1,2,{"y":2,"z":1}]}`},

		{"default applied when absent", deployRules, `{"name":"web"}`, `{"name":"web","region":"us-east-1","spec":{"replicas":1}}`},
		{"default kept when present", deployRules, `{"region":"eu-west-1","spec":{"replicas":3}}`, `{"region":"eu-west-1","spec":{"replicas":3}}`},
		{"default null is present", deployRules, `{"region":null,"spec":{}}`, `{"region":null,"spec":{"replicas":1}}`},
		{"default through non-object is absent", deployRules, `{"spec":"v2"}`, `{"region":"us-east-1","spec":"v2"}`},
		{"default through array is absent", deployRules, `{"spec":[{}]}`, `{"region":"us-east-1","spec":[{}]}`},
		{"default object merges with nested default",
			contract.FingerprintRules{Defaults: map[string]any{"a": map[string]any{"x": 1}, "a.y": 2}},
			`{}`, `{"a":{"x":1,"y":2}}`},
		{"default float and bool", contract.FingerprintRules{Defaults: map[string]any{"f": 2.50, "b": false, "l": []any{"x", 1}}},
			`{}`, `{"b":false,"f":2.5,"l":["x",1]}`},

		{"ignored removed", deployRules, `{"comment":"hi","meta":{"trace":"t1","keep":1},"region":"r","spec":{"replicas":1}}`,
			`{"meta":{"keep":1},"region":"r","spec":{"replicas":1}}`},
		{"ignored absent is fine", deployRules, `{"meta":7}`, `{"meta":7,"region":"us-east-1","spec":{"replicas":1}}`},

		{"secret replaced", deployRules, `{"token":"hunter22","auth":{"password":{"p":[1,2]},"user":"u"}}`,
			`{"auth":{"password":"<secret>","user":"u"},"region":"us-east-1","spec":{"replicas":1},"token":"<secret>"}`},
		{"secret absent stays absent", deployRules, `{"auth":{}}`, `{"auth":{},"region":"us-east-1","spec":{"replicas":1}}`},
		{"secret null is digested", deployRules, `{"token":null}`, `{"region":"us-east-1","spec":{"replicas":1},"token":"<secret>"}`},
		{"ignored and secret: removed", contract.FingerprintRules{Ignore: []string{"t"}, Secrets: []string{"t"}}, `{"t":"x"}`, `{}`},
		{"secret default is digested", contract.FingerprintRules{Defaults: map[string]any{"t": "dflt"}, Secrets: []string{"t"}}, `{}`, `{"t":"<secret>"}`},
		{"dotted key is not a path", contract.FingerprintRules{Ignore: []string{"a.b"}}, `{"a.b":1,"a":{"b":2,"c":3}}`, `{"a":{"c":3},"a.b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compute(testKey, tt.rules, baseAction(tt.args))
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			got := digestRE.ReplaceAllString(recordArguments(t, d.Record), "<secret>")
			if got != tt.want {
				t.Errorf("arguments\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestComputeRefuses(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth) + `1` + strings.Repeat(`}`, MaxDepth)
	tooDeep := strings.Repeat(`{"a":`, MaxDepth) + `[]` + strings.Repeat(`}`, MaxDepth)
	if _, err := Compute(testKey, contract.FingerprintRules{}, baseAction(deep)); err != nil {
		t.Fatalf("MaxDepth levels must be accepted: %v", err)
	}
	atLimit := `{"a":"` + strings.Repeat("x", MaxArgumentsBytes-8) + `"}`
	if _, err := Compute(testKey, contract.FingerprintRules{}, baseAction(atLimit)); len(atLimit) != MaxArgumentsBytes || err != nil {
		t.Fatalf("%d bytes must be accepted: %v", len(atLimit), err)
	}
	big := `{"a":"` + strings.Repeat("x", MaxArgumentsBytes) + `"}`
	tests := []struct {
		name    string
		args    string
		wantErr error
		wantMsg string
	}{
		{"top-level array", `[1]`, ErrInvalidArguments, "arguments: not a JSON object"},
		{"top-level string", `"x"`, ErrInvalidArguments, "not a JSON object"},
		{"top-level null", `null`, ErrInvalidArguments, "not a JSON object"},
		{"blank", `  `, ErrInvalidArguments, "unexpected end"},
		{"truncated", `{"a":`, ErrInvalidArguments, "unexpected end"},
		{"syntax", `{"a" 1}`, ErrInvalidArguments, "invalid JSON at byte"},
		{"trailing data", `{} {}`, ErrInvalidArguments, "data after the JSON value"},
		{"trailing garbage", `{}x`, ErrInvalidArguments, "data after the JSON value"},
		{"duplicate key", `{"a":1,"b":{"c":1,"c":2}}`, ErrInvalidArguments, `duplicate key "b.c"`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, ErrInvalidArguments, "duplicate key"},
		{"too deep", tooDeep, ErrInvalidArguments, "nested deeper than 32"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", ErrInvalidArguments, "not valid UTF-8"},
		{"lone high surrogate", `{"a":"\ud800"}`, ErrInvalidArguments, "lone UTF-16 high surrogate"},
		{"high surrogate then text", `{"a":"\ud800x\udc00"}`, ErrInvalidArguments, "lone UTF-16 high surrogate"},
		{"lone low surrogate", `{"a":"\uDC00"}`, ErrInvalidArguments, "lone UTF-16 low surrogate"},
		{"integer beyond 2^53", `{"id":9007199254740993}`, ErrInvalidArguments, `number at "id" is not exactly representable`},
		{"too many digits", `{"x":[0.10000000000000001]}`, ErrInvalidArguments, `number at "x[0]"`},
		{"overflow", `{"x":1e400}`, ErrInvalidArguments, "not exactly representable"},
		{"underflow", `{"x":1e-400}`, ErrInvalidArguments, "not exactly representable"},
		{"leading zero", `{"x":01}`, ErrInvalidArguments, "invalid JSON"},
		{"NaN", `{"x":NaN}`, ErrInvalidArguments, "invalid JSON"},
		{"too large", big, ErrTooLarge, "arguments: 65544 bytes, limit is 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compute(testKey, contract.FingerprintRules{}, baseAction(tt.args))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

// Errors are logged; they must never carry an argument value, secrets included.
func TestErrorsDoNotEchoValues(t *testing.T) {
	for _, args := range []string{
		`{"token":99999999999999999999}`,
		`{"token":"s3cret-value","token":"s3cret-value"}`,
		`{"token":"s3cret-value" "x"}`,
		`["s3cret-value"]`,
	} {
		_, err := Compute(testKey, deployRules, baseAction(args))
		if err == nil {
			t.Fatalf("%s: accepted", args)
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "9999") {
			t.Errorf("%s: error echoes the value: %v", args, err)
		}
	}
}

func TestInvalidAction(t *testing.T) {
	a := baseAction(`{}`)
	a.Target = "https://x/\xff"
	if _, err := Compute(testKey, contract.FingerprintRules{}, a); !errors.Is(err, ErrInvalidAction) {
		t.Fatalf("err = %v, want ErrInvalidAction", err)
	}
}

func TestCheckRules(t *testing.T) {
	if err := CheckRules(deployRules); err != nil {
		t.Fatalf("deployRules: %v", err)
	}
	deepDefault := any(1)
	for range MaxDepth {
		deepDefault = []any{deepDefault}
	}
	tests := []struct {
		name  string
		rules contract.FingerprintRules
		want  string
	}{
		{"empty segment", contract.FingerprintRules{Ignore: []string{"a..b"}}, `path "a..b" has an empty segment`},
		{"empty path", contract.FingerprintRules{Secrets: []string{""}}, "empty segment"},
		{"trailing dot", contract.FingerprintRules{Defaults: map[string]any{"a.": 1}}, "empty segment"},
		{"not JSON", contract.FingerprintRules{Defaults: map[string]any{"f": func() {}}}, `"f": not JSON-representable`},
		{"NaN", contract.FingerprintRules{Defaults: map[string]any{"f": nanValue()}}, "not JSON-representable"},
		{"YAML map[any]any", contract.FingerprintRules{Defaults: map[string]any{"m": map[any]any{"a": 1}}}, "not JSON-representable"},
		{"inexact number", contract.FingerprintRules{Defaults: map[string]any{"n": uint64(1<<63 + 1)}}, "not exactly representable"},
		{"too deep", contract.FingerprintRules{Defaults: map[string]any{"a": deepDefault}}, "nested deeper than 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRules(tt.rules)
			if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidRules mentioning %q", err, tt.want)
			}
			if _, err := Compute(testKey, tt.rules, baseAction(`{}`)); !errors.Is(err, ErrInvalidRules) {
				t.Errorf("Compute err = %v, want ErrInvalidRules", err)
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// The digests follow the documented construction, so another implementation
// (or a later version of this one) can reproduce them.
func TestDigestConstruction(t *testing.T) {
	a := baseAction(`{"token":"hunter22","name":"web"}`)
	d, err := Compute(testKey, deployRules, a)
	if err != nil {
		t.Fatal(err)
	}
	if want := hmacHex(testKey, "portcullis fingerprint v1", d.Record); d.Fingerprint != want {
		t.Errorf("Fingerprint = %s, want %s", d.Fingerprint, want)
	}
	withoutScope := strings.Replace(string(d.Record), `"intent_scope":"run:5f8097",`, "", 1)
	if withoutScope == string(d.Record) {
		t.Fatal("intent_scope not found in record")
	}
	if want := hmacHex(testKey, "portcullis request v1", []byte(withoutScope)); d.RequestDigest != want {
		t.Errorf("RequestDigest = %s, want %s", d.RequestDigest, want)
	}
	if want := hmacHex(testKey, "portcullis secret v1", []byte(`"hunter22"`)); !strings.Contains(string(d.Record), `"token":"`+want+`"`) {
		t.Errorf("secret digest %s not in record %s", want, d.Record)
	}
	other := Key(append([]byte(nil), testKey...))
	other[0] ^= 1
	d2, err := Compute(other, deployRules, a)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Fingerprint == d.Fingerprint || d2.RequestDigest == d.RequestDigest || string(d2.Record) == string(d.Record) {
		t.Error("a different key must change every digest, the secret's included")
	}
	if _, err := Compute(testKey[:16], deployRules, a); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}
