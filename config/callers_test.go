package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/auth"
)

// The role names config accepts are the roles auth knows.
func TestCallerRolesAreAuthRoles(t *testing.T) {
	var want []string
	for _, r := range auth.Roles {
		want = append(want, string(r))
	}
	if !reflect.DeepEqual(callerRoles, want) || localOperator != auth.LocalOperator {
		t.Fatalf("config roles %v (%s), auth roles %v (%s)", callerRoles, localOperator, want, auth.LocalOperator)
	}
}

const hexA = "3f1c000000000000000000000000000000000000000000000000000000000001"
const hexB = "9A0B000000000000000000000000000000000000000000000000000000000002"

func TestParseCallers(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(`tools:
  pay: {retry: idempotency_key, match_window: 10m, budget: {account: ops, amount: "5"}}
  pay_any: {retry: idempotency_key, match_window: 10m, budget: {account: $.account, amount: $.amount}}
callers:
  deploy-runner: {token_sha256: `+hexA+`, roles: [executor], acts_for: [agent-7], accounts: [acme]}
  alice: {token_sha256: `+hexB+`, cert_sha256: `+strings.Repeat("c", 64)+`, roles: [approver, analyst]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Caller{
		{Name: "deploy-runner", TokenSHA256: hexA, Roles: []string{"executor"}, ActsFor: []string{"agent-7"}, Accounts: []string{"acme"}},
		{Name: "alice", TokenSHA256: strings.ToLower(hexB), CertSHA256: strings.Repeat("c", 64), Roles: []string{"approver", "analyst"}},
	}
	if !reflect.DeepEqual(cfg.Callers, want) {
		t.Fatalf("callers:\n got %+v\nwant %+v", cfg.Callers, want)
	}
	if got := cfg.BudgetAccounts(); !reflect.DeepEqual(got, []string{"ops"}) {
		t.Fatalf("budget accounts %v, want [ops] (argument paths are not accounts)", got)
	}
}

func TestParseCallersBad(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown role", "callers:\n  a: {token_sha256: " + hexA + ", roles: [root]}\n", `bad.yaml:3: callers.a.roles: unknown role "root" (want executor, approver, finance, budget_admin, analyst)`},
		{"short digest", "callers:\n  a: {token_sha256: abc, roles: [analyst]}\n", `callers.a.token_sha256: want a 64-hex-digit SHA-256 (sha256sum), got 3 characters`},
		{"no credential", "callers:\n  a: {roles: [analyst]}\n", `bad.yaml:3: callers.a: needs token_sha256`},
		{"no roles", "callers:\n  a: {token_sha256: " + hexA + "}\n", `callers.a.roles: missing`},
		{"acts_for without executor", "callers:\n  a: {token_sha256: " + hexA + ", roles: [approver], acts_for: [agent-7]}\n", `callers.a: acts_for and accounts are for the executor role only`},
		{"same token twice", "callers:\n  a: {token_sha256: " + hexA + ", roles: [analyst]}\n  b: {token_sha256: " + hexA + ", roles: [finance]}\n", `bad.yaml:4: callers.b.token_sha256: the same digest is already a's`},
		{"agent's token", "agents:\n  agent-7: {token_sha256: " + hexA + "}\ncallers:\n  a: {token_sha256: " + hexA + ", roles: [analyst]}\n", `bad.yaml:5: callers.a.token_sha256: the same token digest is already agent agent-7's`},
		{"caller's token", "callers:\n  a: {token_sha256: " + hexA + ", roles: [analyst]}\nagents:\n  agent-7: {token_sha256: " + hexA + "}\n", `bad.yaml:5: agents.agent-7.token_sha256: the same token digest is already caller a's`},
		{"two agents, one token", "agents:\n  agent-7: {token_sha256: " + hexA + "}\n  agent-8: {token_sha256: " + hexA + "}\n", `agents.agent-8.token_sha256: the same token digest is already agent agent-7's`},
		{"reserved name", "callers:\n  local-operator: {token_sha256: " + hexA + ", roles: [analyst]}\n", `invalid caller name "local-operator"`},
		{"unknown key", "callers:\n  a: {token: x, token_sha256: " + hexA + ", roles: [analyst]}\n", `callers.a.token: unknown key "token" (want token_sha256, cert_sha256, roles, acts_for, accounts)`},
		{"not a mapping", "callers: [a]\n", `bad.yaml:2: callers: want a mapping, got a list`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte("tools: {}\n"+tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}
