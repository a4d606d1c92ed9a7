package budget

import (
	"errors"
	"reflect"
	"testing"
)

func TestSettleAndRelease(t *testing.T) {
	b := workedExample(t)
	b.reserve("op-B", digestOf("B"), 5_000, nil)
	b.settle("op-A", 9_000) // settle for less: 3 000 go back
	if b.a.Spent != 39_000 || b.a.Held != 5_000 {
		t.Fatalf("after settle for less: spent %d held %d", b.a.Spent, b.a.Held)
	}
	c := b.a.Closed["op-A"]
	if c.State != HoldSpent || c.Spent != 9_000 || c.Released != 3_000 || c.Evidence.ExecutionID != "exec-op-A" || c.Version != b.a.Version {
		t.Fatalf("closed record %+v", c)
	}
	last := b.events[len(b.events)-1]
	if last.Kind != Settled || last.Amount != 9_000 || last.Remainder != 3_000 || last.RequestDigest != digestOf("A") {
		t.Fatalf("settled event %+v", last)
	}
	b.release("op-B")
	if b.a.Spent != 39_000 || b.a.Held != 0 || len(b.a.Holds) != 0 || b.a.Closed["op-B"].State != HoldReleased {
		t.Fatalf("after release: %+v", b.a)
	}
}

func TestSettleRefusesBadInput(t *testing.T) {
	ev := evidenceFor("op-A")
	tests := []struct {
		name   string
		settle func(a *Account) (Event, error)
		err    error
	}{
		{"zero amount", func(a *Account) (Event, error) { return Settle(a, "op-A", 0, ev, t0) }, ErrInvalidAmount},
		{"negative amount", func(a *Account) (Event, error) { return Settle(a, "op-A", -1, ev, t0) }, ErrInvalidAmount},
		{"more than held", func(a *Account) (Event, error) { return Settle(a, "op-A", 12_001, ev, t0) }, ErrInvalidAmount},
		{"missing key", func(a *Account) (Event, error) { return Settle(a, "", 1, ev, t0) }, ErrMissingKey},
		{"unknown key", func(a *Account) (Event, error) { return Settle(a, "op-Z", 1, ev, t0) }, ErrNotHeld},
		{"already spent", func(a *Account) (Event, error) { return Settle(a, "op-S", 1, ev, t0) }, ErrAlreadyClosed},
		{"no execution id", func(a *Account) (Event, error) {
			return Settle(a, "op-A", 1, Evidence{TargetStatus: "succeeded"}, t0)
		}, ErrInvalidRequest},
		{"no target status", func(a *Account) (Event, error) {
			return Release(a, "op-A", Evidence{ExecutionID: "e"}, t0)
		}, ErrInvalidRequest},
		{"release closed", func(a *Account) (Event, error) { return Release(a, "op-S", ev, t0) }, ErrAlreadyClosed},
		{"release unknown account", func(*Account) (Event, error) { return Release(nil, "op-A", ev, t0) }, ErrUnknownAccount},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := workedExample(t).a
			before := a.Clone()
			e, err := tc.settle(a)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(e, Event{}) || !reflect.DeepEqual(a, before) {
				t.Fatal("an error came with an event, or the account changed")
			}
		})
	}
}

// An unknown outcome moves nothing: without a Settled or Released record the
// hold stays, however often the operation is retried.
func TestUnknownOutcomeKeepsHold(t *testing.T) {
	b := workedExample(t)
	for range 3 {
		b.reserve("op-A", digestOf("A"), 12_000, nil)
	}
	if h, ok := b.a.Holds["op-A"]; !ok || h.Amount != 12_000 || b.a.Held != 12_000 {
		t.Fatalf("hold after retries: %+v held %d", h, b.a.Held)
	}
}

func TestSetLimit(t *testing.T) {
	b := workedExample(t)
	lower := gbpLimit("acct-1", 20_000)
	e, err := SetLimit(b.a, lower, b.now)
	if err != nil {
		t.Fatal(err)
	}
	if e.AccountVersion != b.a.Version || e.LimitDigest != lower.Digest() {
		t.Fatalf("limit_set %+v", e)
	}
	b.append(e)
	if d := b.reserve("op-C", digestOf("C"), 1, nil); d.Outcome != OutcomeDenied {
		t.Fatalf("reservation under a lowered limit: %+v", d)
	}
	for _, tc := range []struct {
		name string
		l    Limit
		err  error
	}{
		{"currency change", Limit{Account: "acct-1", Currency: "EUR", Limit: 1, Delegator: "d"}, ErrCurrency},
		{"other account", gbpLimit("acct-2", 1), ErrInvalidRequest},
		{"negative limit", gbpLimit("acct-1", -1), ErrInvalidAmount},
		{"bad currency", Limit{Account: "acct-1", Currency: "gbp", Limit: 1, Delegator: "d"}, ErrInvalidRequest},
		{"no delegator", Limit{Account: "acct-1", Currency: "GBP", Limit: 1}, ErrInvalidRequest},
		{"empty validity", Limit{Account: "acct-1", Currency: "GBP", Limit: 1, Delegator: "d", ValidFrom: t0, ValidUntil: t0}, ErrInvalidRequest},
	} {
		if _, err := SetLimit(b.a, tc.l, b.now); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
}
