package budget_test

import (
	"fmt"
	"time"

	"github.com/portcullis-dev/portcullis/budget"
)

// The worked example of docs/design.md §3: limit 50 000 pence, 30 000 spent, op A
// holding 12 000 with its answer lost.
func ExampleReserve() {
	now := time.Date(2025, 10, 27, 9, 0, 0, 0, time.UTC)
	acct := &budget.Account{}
	apply := func(e budget.Event) {
		if err := acct.Apply(e); err != nil { // the adapter appends first
			panic(err)
		}
	}
	must := func(e budget.Event, err error) budget.Event {
		if err != nil {
			panic(err)
		}
		return e
	}
	reserve := func(key, digest string, o *budget.Override) budget.Decision {
		d, err := budget.Reserve(acct, budget.ReserveRequest{OperationKey: key, RequestDigest: digest, Amount: 12_000, Override: o}, now)
		if err != nil {
			panic(err)
		}
		return d
	}

	apply(must(budget.SetLimit(nil, budget.Limit{Account: "team-7", Currency: "GBP", Limit: 50_000, Delegator: "cfo"}, now)))
	d, _ := budget.Reserve(acct, budget.ReserveRequest{OperationKey: "op-S", RequestDigest: "sha256:s", Amount: 30_000}, now)
	apply(*d.Event)
	apply(must(budget.Settle(acct, "op-S", 30_000, budget.Evidence{ExecutionID: "exec-S", TargetStatus: 201}, now)))
	apply(*reserve("op-A", "sha256:a", nil).Event) // answer lost

	retry := reserve("op-A", "sha256:a", nil)
	fmt.Printf("retry A: %s, total %d, within limit %t, appends %t\n", retry.Outcome, retry.Total, retry.WithinLimit, retry.Event != nil)

	b := reserve("op-B", "sha256:a", nil) // same content, new payment
	fmt.Printf("op B:    %s, total %d, within limit %t, appends %s\n", b.Outcome, b.Total, b.WithinLimit, b.Event.Kind)

	b = reserve("op-B", "sha256:a", &budget.Override{By: "cfo", Reason: "supplier deadline"})
	fmt.Printf("op B:    %s, total %d, within limit %t, override by %s\n", b.Outcome, b.Total, b.Event.WithinLimit, b.Event.Override.By)
	// Output:
	// retry A: already_held, total 42000, within limit true, appends false
	// op B:    denied, total 54000, within limit false, appends denied
	// op B:    held, total 54000, within limit false, override by cfo
}
