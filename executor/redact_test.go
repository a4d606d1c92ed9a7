package executor

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// A target's answer that echoes a declared secret argument is redacted
// before it is recorded: as sent, JSON-escaped, URL-escaped, nested under
// a secret path, at the end of a cut body, a number by its digits, and a
// short value as a whole JSON string (outside quotes it stays: replacing
// "123" everywhere would mangle the answer).
func TestSecretsRedact(t *testing.T) {
	args := []byte(`{"release_id":"r8","token":"MCP-SECRET-TOKEN-88","auth":{"key":"k-é/<x>&y"},"creds":["aaaa-1",{"x":"bbbb-2"},7],"pin":"123","n":12345}`)
	s := SecretsOf([]string{"token", "auth.key", "creds", "pin", "n", "missing", "release_id.x"}, args)
	quoted, _ := json.Marshal("k-é/<x>&y")
	for _, tc := range []struct{ in, want string }{
		{`{"request":` + string(args) + `}`, `{"request":{"release_id":"r8","token":"[secret:token]","auth":{"key":"[secret:auth.key]"},"creds":["[secret:creds]",{"x":"[secret:creds]"},7],"pin":"[secret:pin]","n":[secret:n]}}`},
		{`key=` + string(quoted), `key="[secret:auth.key]"`},        // Go's JSON: \u003c \u0026
		{`{"key":"k-\u00e9/<x>&y"}`, `{"key":"[secret:auth.key]"}`}, // ASCII-only JSON (Python)
		{`GET /x?token=MCP-SECRET-TOKEN-88&key=` + url.QueryEscape("k-é/<x>&y"), `GET /x?token=[secret:token]&key=[secret:auth.key]`},
		{`path /` + url.PathEscape("k-é/<x>&y"), `path /[secret:auth.key]`},
		{`short values stay outside quotes: 123 and 1234`, `short values stay outside quotes: 123 and 1234`},
		{`number 12345 echoed`, `number [secret:n] echoed`},
		{`{"echo":"123","other":"1234"}`, `{"echo":"[secret:pin]","other":"1234"}`},
	} {
		if got := s.Redact(tc.in, false); got != tc.want {
			t.Errorf("Redact(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	// A body cut at the cap may end with the start of a secret.
	if got := s.Redact(`{"token":"MCP-SECRET-TO`, true); got != `{"token":"[secret:token]` {
		t.Errorf("cut body: %s", got)
	}
	if got := s.Redact(`{"token":"MCP-SECRET-TO`, false); got != `{"token":"MCP-SECRET-TO` {
		t.Errorf("an uncut body is left alone but for whole secrets: %s", got)
	}
	// The outcome: body and reason; the body stays within the cap.
	o := Outcome{Observed: Answered, Body: strings.Repeat("aaaa-1", MaxResultBytes/6), Reason: `Get "http://t/x?token=MCP-SECRET-TOKEN-88": timeout`}
	r := o.Redact(s)
	if strings.Contains(r.Body, "aaaa-1") || len(r.Body) > MaxResultBytes || !r.Truncated || strings.Contains(r.Reason, "MCP-SECRET") {
		t.Fatalf("outcome: %d bytes, truncated %v, reason %q", len(r.Body), r.Truncated, r.Reason)
	}
	if !SecretsOf(nil, args).Empty() || !SecretsOf([]string{"token"}, []byte(`[1]`)).Empty() {
		t.Fatal("no paths or no object: nothing to redact")
	}
}

// FuzzRedact: whatever the secret and the text around it, no form of the
// secret of MinSecretBytes or more is left in the redacted text, and no
// shorter secret as a whole JSON string.
func FuzzRedact(f *testing.F) {
	f.Add("MCP-SECRET-TOKEN-88", "echo: ", " done", false)
	f.Add("n]n]", "[secret:p", "n]", true)
	f.Add("é<>&\"\\\n", "x", "y", false)
	f.Add("Qz9", `{"token":`, `}`, false)
	f.Fuzz(func(t *testing.T, secret, before, after string, truncated bool) {
		args, err := json.Marshal(map[string]any{"p": secret})
		if err != nil {
			return
		}
		s := SecretsOf([]string{"p"}, args)
		var back map[string]string
		if json.Unmarshal(args, &back) != nil {
			return
		}
		secret = back["p"] // as the executor sends it (invalid UTF-8 replaced)
		out := s.Redact(before+secret+after, truncated)
		if len(secret) >= MinSecretBytes && strings.Contains(out, secret) {
			t.Fatalf("%q left in %q", secret, out)
		}
		// A short one is found as a whole JSON string.
		quoted, _ := json.Marshal(secret)
		if secret != "" && len(secret) < MinSecretBytes && strings.Contains(s.Redact(before+string(quoted)+after, truncated), string(quoted)) {
			t.Fatalf("%s left in %q", quoted, s.Redact(before+string(quoted)+after, truncated))
		}
	})
}
