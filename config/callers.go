package config

import (
	"regexp"
	"slices"
	"strings"
)

// Roles a caller may hold (auth.Roles; config imports no Connect, so the
// names are repeated here and a test keeps the lists equal).
var callerRoles = []string{"executor", "approver", "finance", "budget_admin", "analyst"}

// localOperator is the name of the single operator of a config without callers.
const localOperator = "local-operator"

var callerNameRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// Caller is one entry under callers: who may call the Connect API, how it
// proves it, and what it may do. Only digests are stored, never a token.
type Caller struct {
	Name        string
	TokenSHA256 string   // lower-case hex; "" when the caller uses mTLS only
	CertSHA256  string   // SHA-256 of the client certificate (DER), lower-case hex; "" for none
	Roles       []string // from callerRoles
	ActsFor     []string // actors an executor acts for
	Accounts    []string // budget accounts an executor may use beyond its tools' literal accounts
}

// callers decodes callers: {NAME: {token_sha256, cert_sha256, roles, acts_for, accounts}}.
func (d *decoder) callers(c entry, cfg *Config) {
	entries, ok := d.mapping(c.value, c.path)
	if !ok {
		return
	}
	seen := map[string]string{} // digest → caller
	for _, ce := range entries {
		if !callerNameRE.MatchString(ce.key) || ce.key == localOperator {
			d.errorf(ce.node, ce.path, "invalid caller name %q (want 1-64 characters from A-Z a-z 0-9 _ . @ -, not %s)", ce.key, localOperator)
			continue
		}
		fields, ok := d.mapping(ce.value, ce.path)
		if !ok {
			continue
		}
		x := Caller{Name: ce.key}
		good := true
		for _, f := range fields {
			switch f.key {
			case "token_sha256", "cert_sha256":
				h, ok := d.str(f)
				if !ok {
					good = false
					continue
				}
				h = strings.ToLower(h)
				if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
					d.errorf(f.value, f.path, "want a 64-hex-digit SHA-256 (sha256sum), got %d characters", len(h))
					good = false
					continue
				}
				if other, dup := seen[h]; dup {
					d.errorf(f.value, f.path, "the same digest is already %s's", other)
					good = false
					continue
				}
				seen[h] = ce.key
				if f.key == "token_sha256" && !d.claimToken(f.value, f.path, h, "caller "+ce.key) {
					good = false
					continue
				}
				if f.key == "token_sha256" {
					x.TokenSHA256 = h
				} else {
					x.CertSHA256 = h
				}
			case "roles":
				items, nodes, ok := d.list(f)
				good = good && ok
				for i, r := range items {
					if !slices.Contains(callerRoles, r) {
						d.errorf(nodes[i], f.path, "unknown role %q (want %s)", r, strings.Join(callerRoles, ", "))
						good = false
					}
				}
				x.Roles = items
			case "acts_for":
				items, _, ok := d.list(f)
				good = good && ok
				x.ActsFor = items
			case "accounts":
				items, _, ok := d.list(f)
				good = good && ok
				x.Accounts = items
			default:
				d.unknownKey(f, "token_sha256, cert_sha256, roles, acts_for, accounts")
				good = false
			}
		}
		switch {
		case !good:
			continue
		case x.TokenSHA256 == "" && x.CertSHA256 == "":
			d.errorf(ce.node, ce.path, "needs token_sha256 (printf %%s \"$TOKEN\" | sha256sum) or cert_sha256")
			continue
		case len(x.Roles) == 0:
			d.errorf(ce.node, ce.path+".roles", "missing (want one or more of %s)", strings.Join(callerRoles, ", "))
			continue
		case (len(x.ActsFor) > 0 || len(x.Accounts) > 0) && !slices.Contains(x.Roles, "executor"):
			d.errorf(ce.node, ce.path, "acts_for and accounts are for the executor role only")
			continue
		}
		cfg.Callers = append(cfg.Callers, x)
	}
}

// BudgetAccounts returns the literal budget accounts the tool contracts
// name (not argument paths), sorted: the accounts every executor may use.
func (c *Config) BudgetAccounts() []string {
	var out []string
	for _, t := range c.Tools {
		if b := t.Contract.Budget; b != nil && b.Account != "" && !strings.HasPrefix(b.Account, "$.") {
			out = append(out, b.Account)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
