// Package auth decides who calls the Connect API and what they may do: it
// maps a bearer token (or an mTLS client certificate) to a principal with
// roles, and checks every RPC against the roles table (policy.go) before a
// handler runs, so a refused call records nothing. It offers one Connect
// interceptor (interceptor.go) and one net/http middleware for routes that
// are not Connect (middleware.go); agents on /mcp keep their own tokens.
//
// The package holds no ledger logic; it imports Connect and the generated
// service names, never NATS or Pebble.
package auth

import (
	"context"
	"slices"
)

// Role is a set of RPCs a caller may use (the table in policy.go).
type Role string

// The roles of DESIGN.md §4.
const (
	Executor    Role = "executor"     // Begin and the execution transitions for the actors it acts for
	Approver    Role = "approver"     // approvals: Authorize, Deny, Resolve, ApprovalService
	Finance     Role = "finance"      // budget reads
	BudgetAdmin Role = "budget_admin" // SetLimit, overrides, budget reads
	Analyst     Role = "analyst"      // execution reads, audit, investigation
)

// Roles lists every role, in the order the documentation names them.
var Roles = []Role{Executor, Approver, Finance, BudgetAdmin, Analyst}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// LocalOperator is the principal of every Connect call when the config has
// no callers: one operator on a loopback listener, holding every role.
const LocalOperator = "local-operator"

// Principal is an authenticated caller. Its name is what the ledger records
// as `by`, `delegator` or override author.
type Principal struct {
	Name  string
	Roles []Role
	// ActsFor are the actors an executor may Begin for and move executions of.
	ActsFor []string
	// Accounts are the budget accounts an executor may Reserve, Settle and
	// Release on (the literal accounts of the tool contracts plus the
	// caller's own accounts: list).
	Accounts []string
	// Local marks the single local operator (no callers configured): every
	// role, every actor, every account.
	Local bool
}

// Has reports whether p holds role r.
func (p *Principal) Has(r Role) bool {
	return p != nil && (p.Local || slices.Contains(p.Roles, r))
}

// MayActFor reports whether p may act for actor.
func (p *Principal) MayActFor(actor string) bool {
	return p != nil && (p.Local || slices.Contains(p.ActsFor, actor))
}

// MayUseAccount reports whether p, as an executor, may move holds on account.
func (p *Principal) MayUseAccount(account string) bool {
	return p != nil && (p.Local || slices.Contains(p.Accounts, account))
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the interceptor or middleware
// authenticated, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
