package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/contract"
)

func TestResolveBinding(t *testing.T) {
	b := &contract.BudgetBinding{Account: "$.acct", Amount: "$.payment.amount", Currency: "EUR"}
	acct, amt, cur, err := resolveBinding(b, []byte(`{"acct":"team-a","payment":{"amount":1250}}`))
	if err != nil || acct != "team-a" || amt != 1250 || cur != "EUR" {
		t.Fatalf("%q %d %q %v", acct, amt, cur, err)
	}
	lit := &contract.BudgetBinding{Account: "ops", Amount: "500"}
	if acct, amt, _, err := resolveBinding(lit, nil); err != nil || acct != "ops" || amt != 500 {
		t.Fatalf("literals: %q %d %v", acct, amt, err)
	}
	if _, amt, _, err := resolveBinding(b, []byte(`{"acct":"team-a","payment":{"amount":"1250"}}`)); err != nil || amt != 1250 {
		t.Fatalf("an amount as a decimal string: %d %v", amt, err)
	}
	if _, _, _, err := resolveBinding(b, []byte(`{"acct":"bad acct!","payment":{"amount":5}}`)); !errors.Is(err, budget.ErrBadAccount) ||
		err.Error() != `invalid request: budget account "bad acct!": account names are 1-64 of A-Z a-z 0-9 _ -` {
		t.Errorf("bad account name: %v", err)
	}
	for _, args := range []string{
		`{"acct":"team-a"}`,                            // amount missing
		`{"acct":"team-a","payment":5}`,                // not an object on the way
		`{"acct":"team-a","payment":{"amount":0}}`,     // not positive
		`{"acct":"team-a","payment":{"amount":-3}}`,    // negative
		`{"acct":"team-a","payment":{"amount":1.5}}`,   // not whole
		`{"acct":"team-a","payment":{"amount":1e400}}`, // out of range
		`{"acct":"team-a","payment":{"amount":true}}`,  // not a number
		`{"acct":7,"payment":{"amount":5}}`,            // account not a string
		`{"acct":"team-a","payment":{"amount":99999999999999999999}}`,
		`{"acct":"team-a","payment":{"amount":"+5"}}`,  // a sign: one amount, one spelling
		`{"acct":"team-a","payment":{"amount":"007"}}`, // leading zeros
		`{"acct":"team-a","payment":{"amount":" 5"}}`,  // spaces
		`{"acct":"team-a","payment":{"amount":1e3}}`,   // an exponent
		`not json`,
		`{"acct":"bad acct!","payment":{"amount":5}}`, // not an account name
		`{"acct":"","payment":{"amount":5}}`,          // empty account name
	} {
		if _, _, _, err := resolveBinding(b, []byte(args)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", args, err)
		}
	}
}

// FuzzResolveBinding: arguments come from the agent and $.path bindings
// from the config. A binding never panics, refuses with ErrInvalid, and a
// resolved amount is a positive whole number found where the path points.
func FuzzResolveBinding(f *testing.F) {
	f.Add("$.acct", "$.payment.amount", []byte(`{"acct":"team-a","payment":{"amount":1250}}`))
	f.Add("ops", "500", []byte(nil))
	f.Add("$.a", "$.a", []byte(`{"a":"7"}`))
	f.Add("$.a.b.c", "$..", []byte(`{"a":{"b":{"c":"x"}},"":{"":1}}`))
	f.Add("$.x", "$.n", []byte(`{"x":"y","n":-0}`))
	f.Fuzz(func(t *testing.T, account, amount string, args []byte) {
		acct, amt, _, err := resolveBinding(&contract.BudgetBinding{Account: account, Amount: amount}, args)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if amt <= 0 {
			t.Fatalf("amount %d resolved", amt)
		}
		if p, ok := contract.ArgumentPath(account); ok {
			var m map[string]any
			if err := json.NewDecoder(bytes.NewReader(args)).Decode(&m); err != nil {
				t.Fatalf("a path resolved against arguments that are not an object: %q", args)
			}
			var cur any = m
			for _, k := range strings.Split(p, ".") {
				cur = cur.(map[string]any)[k]
			}
			if cur != acct {
				t.Fatalf("account %q, the path %s holds %v", acct, p, cur)
			}
		} else if acct != account {
			t.Fatalf("literal account %q came back %q", account, acct)
		}
	})
}
