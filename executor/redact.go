package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// A tool contract's secret arguments (fingerprint secrets) never reach
// events, views or logs in the clear: the fingerprint holds a keyed digest
// of them. A target that echoes its request (a deploy API answering with
// the request it performed, a shell command printing its input, an error
// message quoting a URL) would put them back into the recorded result. So
// every observation an executor returns is redacted before it is
// recorded: each secret value found in the result body or the reason is
// replaced by the marker [secret:<path>].
//
// What is found: the string values at the contract's secret paths (dotted,
// as the fingerprint rules read them; where a secret path holds an object
// or an array, every string in it), each as sent, JSON-escaped (Go's
// escaping with and without HTML escapes, and all non-ASCII as \uXXXX in
// lower- and upper-case hex) and URL-escaped (query and path), and at the
// end of a cut (truncated) body the start of one. A number is found by its
// digits as sent. A value shorter than MinSecretBytes (replacing it
// everywhere would mangle answers) is found only as a whole JSON string,
// quotes included ("Qz9" as a value or a key of the echoed request). Not
// found: a short value outside quotes, a short number, a boolean, and a
// value the target transformed in any other way (base64, hashed,
// re-cased, split).
const MinSecretBytes = 4

// Secrets are the forms of a call's secret argument values to redact.
type Secrets struct {
	forms []secretForm // longest first
}

type secretForm struct {
	text, marker string
}

// SecretsOf collects the secret values of args (a JSON object) at paths.
// Arguments that are not a JSON object hold no secret paths.
func SecretsOf(paths []string, args []byte) Secrets {
	if len(paths) == 0 || len(args) == 0 {
		return Secrets{}
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root map[string]any
	if dec.Decode(&root) != nil {
		return Secrets{}
	}
	seen := map[string]bool{}
	var s Secrets
	add := func(text, marker string) {
		if !seen[text] {
			seen[text] = true
			s.forms = append(s.forms, secretForm{text: text, marker: marker})
		}
	}
	for _, p := range paths {
		v, ok := lookup(root, strings.Split(p, "."))
		if !ok {
			continue
		}
		marker := "[secret:" + p + "]"
		strs(v, func(val string, quoted bool) {
			for _, f := range forms(val) {
				switch {
				case len(f) >= MinSecretBytes:
					add(f, marker)
				case quoted && f != "":
					add(`"`+f+`"`, `"`+marker+`"`)
				}
			}
		})
	}
	sort.SliceStable(s.forms, func(i, j int) bool { return len(s.forms[i].text) > len(s.forms[j].text) })
	return s
}

// lookup follows a dotted path through objects.
func lookup(root map[string]any, path []string) (any, bool) {
	var cur any = root
	for _, seg := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// strs calls f with every string and number in v (v itself, or nested in
// it); quoted says it was a JSON string.
func strs(v any, f func(val string, quoted bool)) {
	switch v := v.(type) {
	case string:
		f(v, true)
	case json.Number:
		f(v.String(), false)
	case []any:
		for _, e := range v {
			strs(e, f)
		}
	case map[string]any:
		for _, e := range v {
			strs(e, f)
		}
	}
}

// forms are the ways a target may write the value back.
func forms(v string) []string {
	out := []string{v}
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			q := strings.TrimSuffix(b.String(), "\n")
			out = append(out, q[1:len(q)-1])
		}
	}
	for _, hex := range []string{"\\u%04x", "\\u%04X"} {
		out = append(out, asciiJSON(v, hex))
	}
	return append(out, url.QueryEscape(v), url.PathEscape(v))
}

// asciiJSON is the JSON string escaping (without quotes) of v with every
// non-ASCII rune written as \u escapes (UTF-16, as Python's json.dumps).
func asciiJSON(v, hex string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == utf8.RuneError:
			fmt.Fprintf(&b, hex, r)
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, hex, 0xD800+(r>>10))
			fmt.Fprintf(&b, hex, 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, hex, r)
		}
	}
	return b.String()
}

// Empty reports whether there is nothing to redact.
func (s Secrets) Empty() bool { return len(s.forms) == 0 }

// Redact replaces every secret form in text by its marker; truncated says
// text was cut at the result cap, so a secret's start at its very end is
// replaced too.
func (s Secrets) Redact(text string, truncated bool) string {
	// A marker next to what is left could spell a secret again (one with
	// a "]" in it, say): replace until none is left, a few rounds at most,
	// else drop the whole text.
	for range redactRounds {
		found := false
		for _, f := range s.forms {
			if strings.Contains(text, f.text) {
				found = true
				text = strings.ReplaceAll(text, f.text, f.marker)
			}
		}
		if truncated {
			for _, f := range s.forms {
				for n := len(f.text) - 1; n >= MinSecretBytes; n-- {
					if strings.HasSuffix(text, f.text[:n]) {
						found = true
						text = text[:len(text)-n] + f.marker
						break
					}
				}
			}
		}
		if !found {
			return text
		}
	}
	for _, f := range s.forms {
		if strings.Contains(text, f.text) {
			return redactedWhole
		}
	}
	return text
}

const (
	redactRounds  = 4
	redactedWhole = "[redacted: the answer kept spelling a declared secret argument]"
)

// Redact is the outcome with the secrets replaced in its body and reason.
func (o Outcome) Redact(s Secrets) Outcome {
	if s.Empty() {
		return o
	}
	o.Body = s.Redact(o.Body, o.Truncated)
	if len(o.Body) > MaxResultBytes { // markers longer than what they replaced
		o.Body, _ = ResultText([]byte(o.Body))
		o.Truncated = true
	}
	o.Reason = s.Redact(o.Reason, false)
	return o
}
