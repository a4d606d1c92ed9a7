// Package contract holds the written retry answer for a tool: its retry
// class, fingerprint rules, match window and approval mode. It is pure domain
// code: it imports no NATS, Pebble or Connect, and does no I/O. The config
// package builds contracts from YAML; the ledger and the fingerprint packages
// read them.
package contract

import (
	"fmt"
	"time"

	"github.com/portcullis-dev/portcullis/budget"
)

// RetryClass says what may be done when the caller loses the answer after dispatch.
type RetryClass string

// The retry classes of docs/design.md §1.
const (
	ReadOnly       RetryClass = "read_only"       // recorded, never matched
	IdempotencyKey RetryClass = "idempotency_key" // target honours Idempotency-Key: resend with the same key
	StatusQuery    RetryClass = "status_query"    // outcome can be checked at the target
	Irreversible   RetryClass = "irreversible"    // blocked for review after an unknown outcome
)

// RetryClasses lists every valid class, in the order documentation names them.
var RetryClasses = []RetryClass{ReadOnly, IdempotencyKey, StatusQuery, Irreversible}

// Valid reports whether c is one of RetryClasses.
func (c RetryClass) Valid() bool {
	for _, v := range RetryClasses {
		if c == v {
			return true
		}
	}
	return false
}

// Approval is how an execution of the tool gets authorized.
type Approval string

// Approval modes.
const (
	// ApprovalSession: a new agent process gets session-scoped authorization by default.
	ApprovalSession Approval = "session"
	// ApprovalPerUse: every execution waits in AWAITING_APPROVAL for a person.
	ApprovalPerUse Approval = "per_use"
)

// Valid reports whether a is a known approval mode.
func (a Approval) Valid() bool { return a == ApprovalSession || a == ApprovalPerUse }

// FingerprintRules normalize a tool's arguments before they are digested.
// Paths are dot-separated object keys ("region", "spec.replicas").
type FingerprintRules struct {
	Defaults map[string]any // applied when absent, so present-with-default equals absent
	Ignore   []string       // removed: no semantic meaning
	Secrets  []string       // replaced by a keyed digest; never stored in the clear
}

// MatchWindow is how long a prior execution can absorb a retry.
// The zero value matches nothing; UntilResolved matches while the execution
// is not terminal.
type MatchWindow struct {
	Duration      time.Duration
	UntilResolved bool
}

// Covers reports whether an execution accepted at acceptedAt can still absorb
// a retry at now.
func (w MatchWindow) Covers(acceptedAt, now time.Time) bool {
	if w.UntilResolved {
		return true
	}
	return now.Before(acceptedAt.Add(w.Duration))
}

// String renders the window as written in config ("10m0s", "until_resolved").
func (w MatchWindow) String() string {
	if w.UntilResolved {
		return "until_resolved"
	}
	return w.Duration.String()
}

// BudgetBinding ties a tool's executions to a budget account: Begin holds
// Amount on Account under the execution's operation key. Each value is a
// literal, or "$." followed by a dot-separated argument path
// ("$.payment.amount"). Amount must resolve to a positive integer in minor
// units.
type BudgetBinding struct {
	Account  string
	Amount   string
	Currency string // "" = the account's
}

func isArgumentPath(v string) bool {
	_, ok := ArgumentPath(v)
	return ok
}

// ArgumentPath returns the argument path of a binding value, or false when
// the value is a literal.
func ArgumentPath(v string) (string, bool) {
	if len(v) > 2 && v[:2] == "$." {
		return v[2:], true
	}
	return "", false
}

// MinKeyRetention is the shortest key retention a contract may name: an
// operation key must outlive every plausible retry of its operation.
const MinKeyRetention = 24 * time.Hour

// DefaultTimeout bounds one dispatch of a tool whose definition names no
// timeout (the executors use the same default).
const DefaultTimeout = 30 * time.Second

// KeyRetention is how long an operation key stays bound to its execution.
// The zero value keeps it as long as the ledger keeps the execution (the
// streams deny delete, so: for good); otherwise for Duration (at least
// MinKeyRetention) after the execution was accepted.
type KeyRetention struct {
	Duration time.Duration // 0: as long as the ledger keeps the execution
}

// Covers reports whether a key used by an execution accepted at acceptedAt
// still decides matching at now.
func (k KeyRetention) Covers(acceptedAt, now time.Time) bool {
	if k.Duration <= 0 {
		return true
	}
	return now.Before(acceptedAt.Add(k.Duration))
}

// String renders the retention as written in config ("48h0m0s", "ledger").
func (k KeyRetention) String() string {
	if k.Duration <= 0 {
		return KeyRetentionLedger
	}
	return k.Duration.String()
}

// KeyRetentionLedger is the key_retention that keeps a key as long as the
// ledger keeps its execution (the default).
const KeyRetentionLedger = "ledger"

// IntentScope is the context in which a retry without an operation key is
// plausible, when the caller does not narrow it.
type IntentScope string

// Intent scopes a contract may choose.
const (
	// ScopeAgent: the authenticated agent (the actor behind the bearer
	// token), bounded by the match window. The default: agents reconnect
	// with new transport sessions, or have none.
	ScopeAgent IntentScope = "agent"
	// ScopeSession: the agent's transport session (MCP Mcp-Session-Id).
	ScopeSession IntentScope = "session"
)

// Valid reports whether s is a known intent scope.
func (s IntentScope) Valid() bool { return s == ScopeAgent || s == ScopeSession }

// Contract is the retry answer for one tool.
type Contract struct {
	Tool        string
	Retry       RetryClass
	MatchWindow MatchWindow
	// KeyRetention bounds operation-key matching (the match window bounds
	// fingerprint matching only).
	KeyRetention KeyRetention
	// IntentScope is the default scope of a retry without an operation
	// key ("" means ScopeAgent). The front door applies it; the ledger
	// reads only the action's intent_scope.
	IntentScope IntentScope
	// Timeout bounds one dispatch (0 = DefaultTimeout); with the ledger's
	// grace it sets the dispatch deadline.
	Timeout     time.Duration
	Fingerprint FingerprintRules
	Approval    Approval
	Budget      *BudgetBinding // nil: the tool spends no budget
}

// DispatchTimeout is the contract's Timeout, else DefaultTimeout.
func (c Contract) DispatchTimeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Scope is the contract's IntentScope, ScopeAgent when unset.
func (c Contract) Scope() IntentScope {
	if c.IntentScope == "" {
		return ScopeAgent
	}
	return c.IntentScope
}

// Validate checks the invariants every contract must hold.
func (c Contract) Validate() error {
	switch {
	case c.Tool == "":
		return fmt.Errorf("contract without a tool name")
	case !c.Retry.Valid():
		return fmt.Errorf("tool %q: unknown retry class %q", c.Tool, c.Retry)
	case !c.Approval.Valid():
		return fmt.Errorf("tool %q: unknown approval mode %q", c.Tool, c.Approval)
	case c.Retry != ReadOnly && !c.MatchWindow.UntilResolved && c.MatchWindow.Duration <= 0:
		return fmt.Errorf("tool %q: match_window must be positive or until_resolved", c.Tool)
	case c.KeyRetention.Duration != 0 && c.KeyRetention.Duration < MinKeyRetention:
		return fmt.Errorf("tool %q: key_retention must be at least %s", c.Tool, MinKeyRetention)
	case c.IntentScope != "" && !c.IntentScope.Valid():
		return fmt.Errorf("tool %q: unknown intent scope %q", c.Tool, c.IntentScope)
	case c.Budget != nil && (c.Budget.Account == "" || c.Budget.Amount == ""):
		return fmt.Errorf("tool %q: budget needs account and amount", c.Tool)
	case c.Budget != nil && !isArgumentPath(c.Budget.Account) && !budget.ValidAccountName(c.Budget.Account):
		return fmt.Errorf("tool %q: budget account %q: %w", c.Tool, c.Budget.Account, budget.ErrBadAccount)
	case c.Budget != nil && c.Retry == ReadOnly:
		return fmt.Errorf("tool %q: a read_only tool spends no budget", c.Tool)
	}
	return nil
}

// Book is the set of contracts a gateway knows, by tool name.
type Book map[string]Contract

// Lookup returns the contract for tool, or false when the tool has none
// (such a tool is refused).
func (b Book) Lookup(tool string) (Contract, bool) {
	c, ok := b[tool]
	return c, ok
}
