package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/goccy/go-yaml"
)

// Roles a caller can hold (the same names as the Connect API's).
const (
	RoleExecutor    = "executor"
	RoleApprover    = "approver"
	RoleFinance     = "finance"
	RoleBudgetAdmin = "budget_admin"
	RoleAnalyst     = "analyst"
)

var knownRoles = []string{RoleExecutor, RoleApprover, RoleFinance, RoleBudgetAdmin, RoleAnalyst}

// Principal is an authenticated caller: the name every decision is
// recorded under, and its roles.
type Principal struct {
	Name  string
	Roles []string
}

// Has reports whether p holds any of roles.
func (p Principal) Has(roles ...string) bool {
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// Authenticator turns a caller token into a principal. It is the only
// thing the console needs from authentication.
//
// TODO(lead): when auth/ lands, wire its principal/token check here (an
// adapter from auth's Principal to this one) and drop Callers below.
type Authenticator interface {
	Authenticate(token string) (Principal, bool)
}

// Caller is one entry of callers: the SHA-256 of its token and its roles,
// in the shape the config's callers section will have.
type Caller struct {
	TokenSHA256 string   `yaml:"token_sha256" json:"token_sha256"`
	Roles       []string `yaml:"roles" json:"roles"`
}

// Callers is a fixed set of callers by name: the temporary authenticator
// until auth/ is wired (TODO(lead)). Only token digests are kept.
type Callers map[string]Caller

var _ Authenticator = Callers(nil)

// maxCallersFileBytes bounds the callers file.
const maxCallersFileBytes = 1 << 20

// LoadCallers reads a YAML (or JSON) file of callers:
//
//	alice: {token_sha256: 9a0b…, roles: [approver]}
func LoadCallers(path string) (Callers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("console callers: %w", err)
	}
	if len(b) > maxCallersFileBytes {
		return nil, fmt.Errorf("console callers %s: larger than %d bytes", path, maxCallersFileBytes)
	}
	var c Callers
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("console callers %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("console callers %s: %w", path, err)
	}
	return c, nil
}

// Validate refuses digests that are not 64 hex characters and unknown roles.
func (c Callers) Validate() error {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := c[n]
		if b, err := hex.DecodeString(e.TokenSHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%s.token_sha256: want 64 hex characters", n)
		}
		for _, r := range e.Roles {
			if !slices.Contains(knownRoles, r) {
				return fmt.Errorf("%s.roles: unknown role %q (want one of %v)", n, r, knownRoles)
			}
		}
	}
	return nil
}

// Authenticate compares the token's digest with every caller's in
// constant time.
func (c Callers) Authenticate(token string) (Principal, bool) {
	if token == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	got := hex.EncodeToString(sum[:])
	var found Principal
	ok := false
	for name, e := range c {
		if subtle.ConstantTimeCompare([]byte(got), []byte(e.TokenSHA256)) == 1 {
			found, ok = Principal{Name: name, Roles: slices.Clone(e.Roles)}, true
		}
	}
	return found, ok
}
