package fingerprint

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/portcullis-dev/portcullis/contract"
)

// testKey is a fixed key so that expected digests are stable.
var testKey = Key(bytes.Repeat([]byte{0x42}, KeySize))

// deployRules are the rules of docs/design.md §5's deploy_release, plus nested paths.
var deployRules = contract.FingerprintRules{
	Defaults: map[string]any{"region": "us-east-1", "spec.replicas": 1},
	Ignore:   []string{"comment", "meta.trace"},
	Secrets:  []string{"token", "auth.password"},
}

func baseAction(args string) Action {
	return Action{
		Actor: "agent:alice", Tool: "deploy_release", Channel: "http",
		Target: "https://deploy.example/api", CredentialRef: "cred:deploy", Method: "POST",
		Arguments: []byte(args), IntentScope: "run:5f8097",
	}
}

// recordArguments returns the canonical arguments inside a Record, as bytes.
func recordArguments(t testing.TB, record []byte) string {
	t.Helper()
	var r map[string]json.RawMessage
	if err := json.Unmarshal(record, &r); err != nil {
		t.Fatalf("record is not JSON: %v\n%s", err, record)
	}
	return string(r["arguments"])
}

// hmacHex is an independent computation of the package's keyed digests.
func hmacHex(key []byte, domain string, msg []byte) string {
	sub := hmac.New(sha256.New, key)
	sub.Write([]byte(domain))
	m := hmac.New(sha256.New, sub.Sum(nil))
	m.Write(msg)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

var digestRE = regexp.MustCompile(`hmac-sha256:[0-9a-f]{64}`)
