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
			return Settle(a, "op-A", 1, Evidence{TargetStatus: 201}, t0)
		}, ErrInvalidRequest},
		{"no target status", func(a *Account) (Event, error) {
			return Release(a, "op-A", Evidence{ExecutionID: "e"}, t0)
		}, ErrInvalidRequest},
		{"status out of range", func(a *Account) (Event, error) {
			return Release(a, "op-A", Evidence{TargetStatus: 1000}, t0)
		}, ErrInvalidRequest},
		{"negative status", func(a *Account) (Event, error) {
			return Settle(a, "op-A", 1, Evidence{ExecutionID: "e", TargetStatus: -1, Note: "x"}, t0)
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

// A settlement and a release record what they read (spent, held, the open
// holds with the closed one among them); Apply and Verify hold them to it,
// and a record without the list (written before 2026-12-05) still folds.
func TestClosingRecordsWhatItSaw(t *testing.T) {
	b := workedExample(t)
	b.reserve("op-B", digestOf("B"), 5_000, nil)
	e, err := Release(b.a, "op-B", Evidence{Note: "the bank shows no transfer"}, t0)
	if err != nil {
		t.Fatalf("release with a note only: %v", err)
	}
	want := []Hold{{"op-A", digestOf("A"), 12_000}, {"op-B", digestOf("B"), 5_000}}
	if e.SpentSeen != 30_000 || e.HeldSeen != 17_000 || !reflect.DeepEqual(e.HeldListSeen, want) {
		t.Fatalf("release saw spent %d held %d %v", e.SpentSeen, e.HeldSeen, e.HeldListSeen)
	}

	stale := e
	stale.HeldListSeen = want[:1] // the released hold missing
	stale.HeldSeen = 12_000
	if err := b.a.Clone().Apply(stale); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("a release whose list lacks its hold folded: %v", err)
	}
	wrong := e
	wrong.SpentSeen = 1
	if err := b.a.Clone().Apply(wrong); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("a release that saw another spent folded: %v", err)
	}
	old := e
	old.SpentSeen, old.HeldSeen, old.HeldListSeen = 0, 0, nil
	if err := b.a.Clone().Apply(old); err != nil {
		t.Fatalf("a release without what it saw (older record) does not fold: %v", err)
	}

	findings := Verify(append(append([]Event(nil), b.events...), wrong))
	if len(findings) != 1 || findings[0].Kind != FindingSeenStateMismatch {
		t.Fatalf("verify of a release that saw another spent: %+v", findings)
	}
	b.append(e)
	if f := Verify(b.events); len(f) != 0 {
		t.Fatalf("verify: %+v", f)
	}
}
