package fingerprint

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
	"github.com/portcullis-dev/portcullis/contract"
	"pgregory.net/rapid"
)

// Generated argument trees are Go values: map[string]any, []any, num, flt,
// string, bool and nil. A value is spelled into JSON text by spell, which
// draws key order, white space, number spelling and string escapes, so one
// tree has many spellings with one meaning.

// num is the exact decimal m × 10^e; it has many spellings (1, 1.0, 10E-1).
type num struct {
	m int64
	e int
}

// flt is a double spelled in one of its shortest forms.
type flt float64

// keyNames collide often with each other and with the paths of deployRules.
var keyNames = []string{"a", "b", "region", "spec", "replicas", "comment", "meta", "trace", "token", "auth", "password", "é", "😀", "a.b"}

var trickyRunes = []rune{'"', '\\', '/', 0, '\n', 0x1f, 0x7f, 0x2028, 0xfeff, 0xffff, 0x1F600, 'é', '\u20ac'}

var genString = rapid.StringOfN(rapid.OneOf(rapid.Rune(), rapid.SampledFrom(trickyRunes)), 0, 12, -1)

var genKey = rapid.OneOf(rapid.SampledFrom(keyNames), genString)

func genLeaf(t *rapid.T) any {
	switch rapid.IntRange(0, 5).Draw(t, "leaf") {
	case 0:
		return num{rapid.Int64Range(-1_000_000, 1_000_000).Draw(t, "m"), rapid.IntRange(-6, 6).Draw(t, "e")}
	case 1:
		return flt(rapid.Float64().Draw(t, "f"))
	case 2:
		return genString.Draw(t, "s")
	case 3:
		return rapid.Bool().Draw(t, "bool")
	case 4:
		return nil
	default:
		return num{rapid.Int64Range(-3, 3).Draw(t, "m"), 0}
	}
}

func genValue(t *rapid.T, depth int) any {
	if depth >= 4 {
		return genLeaf(t)
	}
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		return genObject(t, depth+1)
	case 1:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		arr := make([]any, n)
		for i := range arr {
			arr[i] = genValue(t, depth+1)
		}
		return arr
	default:
		return genLeaf(t)
	}
}

func genObject(t *rapid.T, depth int) map[string]any {
	n := rapid.IntRange(0, 5).Draw(t, "members")
	obj := map[string]any{}
	for range n {
		obj[genKey.Draw(t, "key")] = genValue(t, depth)
	}
	return obj
}

// spell writes v as JSON text, drawing every free choice.
func spell(t *rapid.T, v any) string {
	var b strings.Builder
	spellTo(t, &b, v)
	return b.String()
}

func ws(t *rapid.T) string {
	return rapid.SampledFrom([]string{"", "", " ", "\n", "\t", " \r\n  "}).Draw(t, "ws")
}

func spellTo(t *rapid.T, b *strings.Builder, v any) {
	b.WriteString(ws(t))
	switch v := v.(type) {
	case map[string]any:
		keys := rapid.Permutation(slices.Sorted(maps.Keys(v))).Draw(t, "order")
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(ws(t) + ",")
			}
			b.WriteString(ws(t))
			spellString(t, b, k)
			b.WriteString(ws(t) + ":")
			spellTo(t, b, v[k])
		}
		b.WriteString(ws(t) + "}")
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(ws(t) + ",")
			}
			spellTo(t, b, e)
		}
		b.WriteString(ws(t) + "]")
	case num:
		b.WriteString(spellNum(t, v))
	case int: // a default from deployRules
		b.WriteString(spellNum(t, num{int64(v), 0}))
	case flt:
		f := float64(v)
		b.WriteString(strconv.FormatFloat(f, rapid.SampledFrom([]byte{'g', 'e', 'f', 'E'}).Draw(t, "ffmt"), -1, 64))
	case string:
		spellString(t, b, v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		panic(fmt.Sprintf("spell: %T", v))
	}
	b.WriteString(ws(t))
}

// spellNum writes m × 10^e with a drawn number of trailing zeros, decimal
// point position, leading fraction zeros and exponent style.
func spellNum(t *rapid.T, n num) string {
	if n.m == 0 {
		return rapid.SampledFrom([]string{"0", "-0", "0.0", "0e5", "-0.000E-3", "0.0e+0"}).Draw(t, "zero")
	}
	sign := ""
	m := n.m
	if m < 0 {
		sign, m = "-", -m
	}
	z := rapid.IntRange(0, 3).Draw(t, "zeros")
	digits := strconv.FormatInt(m, 10) + strings.Repeat("0", z)
	exp := n.e - z
	p := rapid.IntRange(0, len(digits)).Draw(t, "point")
	intPart, frac := digits[:p], digits[p:]
	if intPart == "" {
		intPart = "0"
		frac = strings.Repeat("0", rapid.IntRange(0, 2).Draw(t, "lead")) + frac
	}
	exp += len(frac) // digits × 10^exp == intPart.frac × 10^(exp+len(frac))
	out := sign + intPart
	if frac != "" {
		out += "." + frac
	}
	style := rapid.IntRange(0, 3).Draw(t, "expstyle")
	if exp == 0 && style == 0 {
		return out
	}
	e := "e"
	if style&1 == 1 {
		e = "E"
	}
	if exp >= 0 && style >= 2 {
		e += "+"
	}
	return out + e + strconv.Itoa(exp)
}

// spellString writes s minimally escaped, with non-ASCII escaped, or with
// every character escaped (astral runes as surrogate pairs).
func spellString(t *rapid.T, b *strings.Builder, s string) {
	mode := rapid.IntRange(0, 2).Draw(t, "escape")
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			if mode == 2 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteByte('\\')
				b.WriteRune(r)
			}
		case r < 0x20 || mode == 2 || (mode == 1 && r > 0x7e):
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(b, `\u%04X`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// --- the reference model: what a tree means after deployRules ---

// meaning maps a tree to comparable Go values: numbers become float64, so
// that two trees mean the same exactly when reflect.DeepEqual says so.
func meaning(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = meaning(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = meaning(e)
		}
		return out
	case num:
		f, err := strconv.ParseFloat(fmt.Sprintf("%de%d", v.m, v.e), 64)
		if err != nil {
			panic(err)
		}
		return f + 0 // -0 is 0
	case flt:
		return float64(v) + 0
	case int:
		return float64(v)
	}
	return v
}

// refNormalize applies deployRules to the meaning of args, written
// independently of the package: defaults (creating parents), ignore,
// secrets replaced by an injective placeholder.
func refNormalize(args map[string]any) map[string]any {
	m := meaning(args).(map[string]any)
	walk := func(p string, create bool) (map[string]any, string) {
		segs := strings.Split(p, ".")
		obj := m
		for _, s := range segs[:len(segs)-1] {
			next, present := obj[s]
			if !present && create {
				next = map[string]any{}
				obj[s] = next
			}
			o, ok := next.(map[string]any)
			if !ok {
				return nil, ""
			}
			obj = o
		}
		return obj, segs[len(segs)-1]
	}
	for _, p := range slices.Sorted(maps.Keys(deployRules.Defaults)) {
		if obj, k := walk(p, true); obj != nil {
			if _, ok := obj[k]; !ok {
				obj[k] = meaning(deployRules.Defaults[p])
			}
		}
	}
	for _, p := range deployRules.Ignore {
		if obj, k := walk(p, false); obj != nil {
			delete(obj, k)
		}
	}
	for _, p := range slices.Sorted(slices.Values(deployRules.Secrets)) {
		if obj, k := walk(p, false); obj != nil {
			if v, ok := obj[k]; ok {
				j, err := json.Marshal(v)
				if err != nil {
					panic(err)
				}
				obj[k] = "SECRET:" + string(j)
			}
		}
	}
	return m
}

func mustCompute(t *rapid.T, a Action) Digests {
	d, err := Compute(testKey, deployRules, a)
	if err != nil {
		t.Fatalf("Compute(%q): %v", a.Arguments, err)
	}
	if c, err := jcs.Transform(d.Record); err != nil || string(c) != string(d.Record) {
		t.Fatalf("record is not RFC 8785 canonical (%v):\n%s\n%s", err, d.Record, c)
	}
	return d
}

// Key order, white space, number spelling and string escapes never change
// any digest.
func TestPropertySpellingDoesNotMatter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		args := genObject(t, 1)
		d1 := mustCompute(t, baseAction(spell(t, args)))
		d2 := mustCompute(t, baseAction(spell(t, args)))
		if !sameDigests(d1, d2) {
			t.Fatalf("two spellings of one tree differ:\n%s\n%s", d1.Record, d2.Record)
		}
	})
}

// Writing a default out explicitly is the same as leaving it absent.
func TestPropertyDefaultPresentOrAbsent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		args := genObject(t, 1)
		withDefaults := deepCopy(args).(map[string]any)
		for _, p := range []string{"region", "spec.replicas"} {
			segs := strings.Split(p, ".")
			obj := withDefaults
			for _, s := range segs[:len(segs)-1] {
				if _, ok := obj[s]; !ok {
					obj[s] = map[string]any{}
				}
				next, ok := obj[s].(map[string]any)
				if !ok {
					obj = nil
					break
				}
				obj = next
			}
			if obj == nil {
				continue
			}
			if _, ok := obj[segs[len(segs)-1]]; !ok {
				obj[segs[len(segs)-1]] = deployRules.Defaults[p]
			}
		}
		absent := mustCompute(t, baseAction(spell(t, args)))
		present := mustCompute(t, baseAction(spell(t, withDefaults)))
		if !sameDigests(absent, present) {
			t.Fatalf("default written out changed the digests:\n%s\n%s", absent.Record, present.Record)
		}
	})
}

// Changing the arguments changes the fingerprint exactly when the change
// means something under the rules (not an ignored field, not a default
// written out).
func TestPropertyArgumentChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := genObject(t, 1)
		after := mutate(t, before)
		db := mustCompute(t, baseAction(spell(t, before)))
		da := mustCompute(t, baseAction(spell(t, after)))
		same := reflect.DeepEqual(refNormalize(before), refNormalize(after))
		if same != (db.Fingerprint == da.Fingerprint) {
			t.Fatalf("reference says same=%v, fingerprints equal=%v\nbefore %s\nafter  %s", same, !same, db.Record, da.Record)
		}
		if same != (db.RequestDigest == da.RequestDigest) {
			t.Fatalf("reference says same=%v, request digests disagree", same)
		}
	})
}

// Changing any field of the action other than the arguments changes the
// fingerprint; all but intent_scope change the request digest too.
func TestPropertyActionFieldChange(t *testing.T) {
	fields := []string{"actor", "tool", "channel", "target", "credential_ref", "method", "intent_scope"}
	rapid.Check(t, func(t *rapid.T) {
		a := baseAction(spell(t, genObject(t, 1)))
		b := a
		field := rapid.SampledFrom(fields).Draw(t, "field")
		value := genString.Draw(t, "value")
		switch field {
		case "actor":
			b.Actor = value
		case "tool":
			b.Tool = value
		case "channel":
			b.Channel = value
		case "target":
			b.Target = value
		case "credential_ref":
			b.CredentialRef = value
		case "method":
			b.Method = value
		case "intent_scope":
			b.IntentScope = value
		}
		da, db := mustCompute(t, a), mustCompute(t, b)
		if a.Actor == b.Actor && a.Tool == b.Tool && a.Channel == b.Channel && a.Target == b.Target &&
			a.CredentialRef == b.CredentialRef && a.Method == b.Method && a.IntentScope == b.IntentScope {
			if !sameDigests(da, db) {
				t.Fatal("same action, different digests")
			}
			return
		}
		if da.Fingerprint == db.Fingerprint {
			t.Fatalf("changing %s kept the fingerprint", field)
		}
		if (da.RequestDigest == db.RequestDigest) != (field == "intent_scope") {
			t.Fatalf("changing %s: request digest equal = %v", field, da.RequestDigest == db.RequestDigest)
		}
	})
}

// A secret (at "token" or "auth.password", alone or inside a larger value)
// never appears in the record or the digests, in any JSON spelling; the same
// secret gives the same record.
func TestPropertySecretNeverInRecord(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := rapid.StringOfN(rapid.OneOf(rapid.Rune(), rapid.SampledFrom(trickyRunes)), 8, 40, -1).Draw(t, "secret")
		args := genObject(t, 1)
		delete(args, "token")
		delete(args, "auth")
		var value any = secret
		if rapid.Bool().Draw(t, "wrapped") {
			value = map[string]any{"k": []any{secret, num{1, 0}}}
		}
		if rapid.Bool().Draw(t, "nested") {
			args["auth"] = map[string]any{"password": value, "user": "u"}
		} else {
			args["token"] = value
		}
		forms := leakForms(secret)
		clean := mustCompute(t, baseAction(spell(t, withoutSecret(args))))
		for _, f := range forms {
			if strings.Contains(string(clean.Record), f) {
				t.Skip("the secret occurs in the rest of the record by chance")
			}
		}
		d := mustCompute(t, baseAction(spell(t, args)))
		for _, f := range forms {
			for name, s := range map[string]string{"Record": string(d.Record), "Fingerprint": d.Fingerprint, "RequestDigest": d.RequestDigest} {
				if strings.Contains(s, f) {
					t.Fatalf("secret %q appears in %s: %s", f, name, s)
				}
			}
		}
		if again := mustCompute(t, baseAction(spell(t, args))); !sameDigests(again, d) {
			t.Fatal("same secret, different digests")
		}
		// The check can fail: without the secrets rule the value is in the clear.
		open, err := Compute(testKey, rulesWithoutSecrets(), baseAction(spell(t, args)))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range forms {
			found = found || strings.Contains(string(open.Record), f)
		}
		if !found {
			t.Fatalf("control failed: secret not found in an unprotected record %s", open.Record)
		}
	})
}

// leakForms are the spellings in which s could appear in JSON.
func leakForms(s string) []string {
	c, err := canonicalJSON(s)
	if err != nil {
		panic(err)
	}
	j, _ := json.Marshal(s)
	return []string{s, strings.Trim(string(c), `"`), strings.Trim(string(j), `"`)}
}

func withoutSecret(args map[string]any) map[string]any {
	c := deepCopy(args).(map[string]any)
	delete(c, "token")
	delete(c, "auth")
	return c
}

func rulesWithoutSecrets() contract.FingerprintRules {
	return contract.FingerprintRules{Defaults: deployRules.Defaults, Ignore: deployRules.Ignore}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// mutate returns a copy of obj with one drawn change: a value replaced, a
// member removed or a member added, anywhere in the tree.
func mutate(t *rapid.T, obj map[string]any) map[string]any {
	root := deepCopy(obj).(map[string]any)
	var containers []any // every object and array in the tree
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			containers = append(containers, v)
			for _, k := range slices.Sorted(maps.Keys(v)) {
				collect(v[k])
			}
		case []any:
			containers = append(containers, v)
			for _, e := range v {
				collect(e)
			}
		}
	}
	collect(root)
	c := rapid.SampledFrom(containers).Draw(t, "container")
	switch c := c.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(c))
		op := rapid.IntRange(0, 2).Draw(t, "op")
		if len(keys) == 0 {
			op = 2
		}
		switch op {
		case 0:
			c[rapid.SampledFrom(keys).Draw(t, "replace")] = genValue(t, 3)
		case 1:
			delete(c, rapid.SampledFrom(keys).Draw(t, "remove"))
		default:
			c[genKey.Draw(t, "add")] = genValue(t, 3)
		}
	case []any:
		if len(c) > 0 {
			c[rapid.IntRange(0, len(c)-1).Draw(t, "index")] = genValue(t, 3)
		}
	}
	return root
}

func TestSpellNumIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := num{rapid.Int64Range(-1_000_000, 1_000_000).Draw(t, "m"), rapid.IntRange(-6, 6).Draw(t, "e")}
		s := spellNum(t, n)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != meaning(n).(float64) || math.IsInf(f, 0) {
			t.Fatalf("%v spelled %q parses to %v, %v", n, s, f, err)
		}
	})
}

func sameDigests(a, b Digests) bool {
	return string(a.Record) == string(b.Record) && a.Fingerprint == b.Fingerprint && a.RequestDigest == b.RequestDigest
}
