package fingerprint_test

import (
	"bytes"
	"fmt"

	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/fingerprint"
)

func ExampleCompute() {
	key := fingerprint.Key(bytes.Repeat([]byte{0x42}, fingerprint.KeySize)) // use LoadOrCreateKey in a real ledger
	rules := contract.FingerprintRules{
		Defaults: map[string]any{"region": "us-east-1"},
		Ignore:   []string{"comment"},
		Secrets:  []string{"token"},
	}
	d, err := fingerprint.Compute(key, rules, fingerprint.Action{
		Actor:         "agent:alice",
		Tool:          "deploy_release",
		Channel:       "http",
		Target:        "https://deploy.example/api",
		CredentialRef: "cred:deploy",
		Method:        "POST",
		Arguments:     []byte(`{"version": "1.4.0", "replicas": 3.0, "comment": "friday", "token": "hunter22"}`),
		IntentScope:   "run:5f8097",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(d.Record))
	fmt.Println(d.Fingerprint)

	_, err = fingerprint.Compute(key, rules, fingerprint.Action{Tool: "deploy_release", Arguments: []byte(`["1.4.0"]`)})
	fmt.Println(err)
	// Output:
	// {"actor":"agent:alice","arguments":{"region":"us-east-1","replicas":3,"token":"hmac-sha256:b8803a3199cc7cdf6ad3731218de31b09a24d8ab071a974d34548adf7955f38c","version":"1.4.0"},"channel":"http","credential_ref":"cred:deploy","intent_scope":"run:5f8097","method":"POST","target":"https://deploy.example/api","tool":"deploy_release"}
	// hmac-sha256:21dc9b3fbbb50bff6ddc2f679a68430b43ca62b7a2849c46fdacb791edf672ac
	// arguments: not a JSON object: invalid arguments
}
