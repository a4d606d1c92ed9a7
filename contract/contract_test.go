package contract

import (
	"strings"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	at := time.Date(2026, 7, 22, 10, 0, 0, 0, time.UTC)
	w := MatchWindow{Duration: 10 * time.Minute}
	if !w.Covers(at, at.Add(10*time.Minute-time.Nanosecond)) || w.Covers(at, at.Add(10*time.Minute)) {
		t.Fatal("a 10m window covers [accepted, accepted+10m)")
	}
	if (MatchWindow{}).Covers(at, at) {
		t.Fatal("the zero window matches nothing")
	}
	if !(MatchWindow{UntilResolved: true}).Covers(at, at.Add(1000*time.Hour)) {
		t.Fatal("until_resolved covers any time")
	}
	if s := (MatchWindow{UntilResolved: true}).String(); s != "until_resolved" {
		t.Fatal(s)
	}
	k := KeyRetention{Duration: 48 * time.Hour}
	if !k.Covers(at, at.Add(47*time.Hour)) || k.Covers(at, at.Add(48*time.Hour)) {
		t.Fatal("a 48h retention covers [accepted, accepted+48h)")
	}
	if !(KeyRetention{}).Covers(at, at.Add(10000*time.Hour)) || (KeyRetention{}).String() != KeyRetentionLedger {
		t.Fatal("the zero retention keeps the key as long as the ledger")
	}
}

func TestArgumentPath(t *testing.T) {
	for v, want := range map[string]string{"$.amount": "amount", "$.payment.amount": "payment.amount"} {
		if p, ok := ArgumentPath(v); !ok || p != want {
			t.Errorf("%q: %q %v", v, p, ok)
		}
	}
	for _, v := range []string{"500", "$.", "$", "", "acct-1", "$amount"} {
		if _, ok := ArgumentPath(v); ok {
			t.Errorf("%q is a literal", v)
		}
	}
}

func TestDefaults(t *testing.T) {
	if (Contract{}).DispatchTimeout() != DefaultTimeout || (Contract{Timeout: time.Second}).DispatchTimeout() != time.Second {
		t.Fatal("dispatch timeout")
	}
	if (Contract{}).Scope() != ScopeAgent || (Contract{IntentScope: ScopeSession}).Scope() != ScopeSession {
		t.Fatal("scope")
	}
}

func TestValidate(t *testing.T) {
	ok := Contract{Tool: "t", Retry: IdempotencyKey, Approval: ApprovalSession, MatchWindow: MatchWindow{Duration: time.Minute}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bound := ok
	bound.Budget = &BudgetBinding{Account: "$.account", Amount: "$.amount"}
	if err := bound.Validate(); err != nil {
		t.Fatalf("an account from the arguments is checked per call: %v", err)
	}
	ro := Contract{Tool: "r", Retry: ReadOnly, Approval: ApprovalSession}
	if err := ro.Validate(); err != nil {
		t.Fatalf("read_only needs no window: %v", err)
	}
	for want, mut := range map[string]func(c *Contract){
		"without a tool name":          func(c *Contract) { c.Tool = "" },
		"unknown retry class":          func(c *Contract) { c.Retry = "sometimes" },
		"unknown approval mode":        func(c *Contract) { c.Approval = "maybe" },
		"match_window must be":         func(c *Contract) { c.MatchWindow = MatchWindow{} },
		"key_retention must be":        func(c *Contract) { c.KeyRetention = KeyRetention{Duration: time.Hour} },
		"unknown intent scope":         func(c *Contract) { c.IntentScope = "planet" },
		"budget needs account":         func(c *Contract) { c.Budget = &BudgetBinding{Account: "a"} },
		"a read_only tool spends no b": func(c *Contract) { c.Retry, c.Budget = ReadOnly, &BudgetBinding{Account: "a", Amount: "1"} },
		"account names are 1-64":       func(c *Contract) { c.Budget = &BudgetBinding{Account: "ops team", Amount: "1"} },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

func TestBook(t *testing.T) {
	b := Book{"t": {Tool: "t"}}
	if _, ok := b.Lookup("t"); !ok {
		t.Fatal("known tool")
	}
	if _, ok := b.Lookup("u"); ok {
		t.Fatal("a tool without a contract has none")
	}
}
