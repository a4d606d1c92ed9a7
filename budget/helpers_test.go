package budget

import (
	"fmt"
	"time"
)

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

var t0 = time.Date(2025, 10, 27, 9, 0, 0, 0, time.UTC)

func gbpLimit(account string, limit int64) Limit {
	return Limit{Account: account, Currency: "GBP", Limit: limit, Delegator: "finance@example.org"}
}

// book is an account with its stream: every event is checked by Apply
// before it is kept, as the adapter will do after its append.
type book struct {
	t      tb
	a      *Account
	events []Event
	now    time.Time
}

func newBook(t tb, l Limit) *book {
	t.Helper()
	b := &book{t: t, a: &Account{}, now: t0}
	e, err := SetLimit(nil, l, b.now)
	if err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
	b.append(e)
	return b
}

func (b *book) append(e Event) {
	b.t.Helper()
	if err := b.a.Apply(e); err != nil {
		b.t.Fatalf("Apply(%s %s): %v", e.Kind, e.OperationKey, err)
	}
	b.events = append(b.events, e)
	b.now = b.now.Add(time.Minute)
}

// reserve decides and appends the event, if any.
func (b *book) reserve(key, digest string, amount int64, o *Override) Decision {
	b.t.Helper()
	d, err := Reserve(b.a, ReserveRequest{OperationKey: key, RequestDigest: digest, Amount: amount, Override: o}, b.now)
	if err != nil {
		b.t.Fatalf("Reserve(%s): %v", key, err)
	}
	if d.Event != nil {
		b.append(*d.Event)
	}
	return d
}

func (b *book) settle(key string, amount int64) {
	b.t.Helper()
	e, err := Settle(b.a, key, amount, evidenceFor(key), b.now)
	if err != nil {
		b.t.Fatalf("Settle(%s, %d): %v", key, amount, err)
	}
	b.append(e)
}

func (b *book) release(key string) {
	b.t.Helper()
	e, err := Release(b.a, key, Evidence{ExecutionID: "exec-" + key, TargetStatus: 404}, b.now)
	if err != nil {
		b.t.Fatalf("Release(%s): %v", key, err)
	}
	b.append(e)
}

func evidenceFor(key string) Evidence {
	return Evidence{ExecutionID: "exec-" + key, TargetStatus: 201, Note: "payment " + key + " confirmed"}
}

func digestOf(s string) string { return fmt.Sprintf("sha256:req-%s", s) }

var cfo = &Override{By: "cfo@example.org", Reason: "quarter-end supplier payment"}

// workedExample builds docs/design.md §3's state: limit 50 000 pence, 30 000
// spent, op A holding 12 000 with its answer lost.
func workedExample(t tb) *book {
	t.Helper()
	b := newBook(t, gbpLimit("acct-1", 50_000))
	b.reserve("op-S", digestOf("S"), 30_000, nil)
	b.settle("op-S", 30_000)
	b.reserve("op-A", digestOf("A"), 12_000, nil) // its answer is lost
	return b
}
