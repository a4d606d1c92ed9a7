package budget

import (
	"errors"
	"testing"
)

// Each corruption of a valid stream is refused by Apply and named by Verify.
func TestVerifyAndApplyCatchCorruption(t *testing.T) {
	// base: the worked example, then a valid decision for op-C (2 000,
	// within the limit) that each case corrupts or replaces.
	type stream struct {
		b    *book
		next Event // the valid next event
	}
	base := func(t *testing.T) stream {
		b := workedExample(t)
		d, err := Reserve(b.a, ReserveRequest{OperationKey: "op-C", RequestDigest: digestOf("C"), Amount: 2_000}, b.now)
		if err != nil {
			t.Fatal(err)
		}
		return stream{b, *d.Event}
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, s stream) Event
		kind    string
		sev     Severity
	}{
		{"held total disagrees with the held list", func(_ *testing.T, s stream) Event {
			e := s.next
			e.HeldSeen = 11_000
			e.WithinLimit = withinLimit(e.SpentSeen, e.HeldSeen, e.Amount, e.Limit)
			return e
		}, FindingHeldSumMismatch, SeverityError},
		{"held list hides a hold, totals agree", func(_ *testing.T, s stream) Event {
			e := s.next
			e.HeldListSeen = nil
			e.HeldSeen = 0
			return e
		}, FindingHeldSumMismatch, SeverityError},
		{"within_limit flag wrong", func(_ *testing.T, s stream) Event {
			e := s.next
			e.Amount = 9_000 // 51 000 > 50 000, flag still true
			return e
		}, FindingWithinLimitWrong, SeverityError},
		{"allowed over the limit without override", func(_ *testing.T, s stream) Event {
			e := s.next
			e.Amount, e.WithinLimit = 9_000, false
			return e
		}, FindingOverLimit, SeverityError},
		{"retry counted again", func(_ *testing.T, s stream) Event {
			return s.b.events[len(s.b.events)-1] // op-A's Reserved, appended twice
		}, FindingDoubleCountedRetry, SeverityError},
		{"retry after settlement counted again", func(_ *testing.T, s stream) Event {
			e := s.b.events[1] // op-S's Reserved
			e.AccountVersion, e.SpentSeen, e.HeldSeen = s.b.a.Version, s.b.a.Spent, s.b.a.Held
			e.HeldListSeen = s.b.a.OpenHolds()
			return e
		}, FindingDoubleCountedRetry, SeverityError},
		{"stale read missed a hold", func(t *testing.T, s stream) Event {
			old, err := Fold(s.b.events[:3]) // before op-A was reserved
			if err != nil {
				t.Fatal(err)
			}
			d, err := Reserve(old, ReserveRequest{OperationKey: "op-C", RequestDigest: digestOf("C"), Amount: 15_000}, s.b.now)
			if err != nil || d.Outcome != OutcomeHeld {
				t.Fatalf("%+v %v", d, err)
			}
			return *d.Event
		}, FindingStaleReadMissedHold, SeverityError},
		{"spent seen is not the account's", func(_ *testing.T, s stream) Event {
			e := s.next
			e.SpentSeen = 0
			return e
		}, FindingSeenStateMismatch, SeverityError},
		{"settle twice", func(_ *testing.T, s stream) Event {
			e := s.b.events[2] // op-S's Settled
			e.AccountVersion = s.b.a.Version
			return e
		}, FindingDoubleCountedRetry, SeverityError},
		{"settle for more than held", func(t *testing.T, s stream) Event {
			e, err := Settle(s.b.a, "op-A", 12_000, evidenceFor("op-A"), s.b.now)
			if err != nil {
				t.Fatal(err)
			}
			e.Amount = 13_000
			return e
		}, FindingHeldSumMismatch, SeverityError},
		{"version from the future", func(_ *testing.T, s stream) Event {
			e := s.next
			e.AccountVersion += 3
			return e
		}, FindingInvalidEvent, SeverityError},
		{"currency changed", func(_ *testing.T, s stream) Event {
			e := s.next
			e.Currency = "EUR"
			return e
		}, FindingInvalidEvent, SeverityError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base(t)
			if fs := Verify(append(s.b.events, s.next)); len(fs) != 0 {
				t.Fatalf("valid stream has findings: %+v", fs)
			}
			bad := tc.corrupt(t, s)
			before := s.b.a.Clone()
			if err := s.b.a.Apply(bad); !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Apply accepted the corrupt event (err %v)", err)
			}
			if s.b.a.Version != before.Version || s.b.a.Held != before.Held || s.b.a.Spent != before.Spent {
				t.Fatal("a refused event changed the account")
			}
			fs := Verify(append(s.b.events, bad))
			found := false
			for _, f := range fs {
				if f.Index != len(s.b.events) {
					t.Errorf("finding on an earlier event: %+v", f)
				}
				if f.Kind == tc.kind && f.Severity == tc.sev {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a %s/%s finding, got %+v", tc.kind, tc.sev, fs)
			}
		})
	}
}

// A stale read that missed nothing (the intervening event was a denial) is
// not flagged; one whose arithmetic fails against the true state is, even if
// its held list lacks nothing that is open now.
func TestVerifyStaleReadPrecision(t *testing.T) {
	b := workedExample(t)
	old := b.a.Clone()
	b.reserve("op-B", digestOf("B"), 12_000, nil) // denied: no new hold
	d, err := Reserve(old, ReserveRequest{OperationKey: "op-C", RequestDigest: digestOf("C"), Amount: 1_000}, b.now)
	if err != nil {
		t.Fatal(err)
	}
	events := append(b.events, *d.Event)
	for _, f := range Verify(events) {
		if f.Kind != FindingOverLimit {
			t.Fatalf("harmless stale read flagged: %+v", f)
		}
	}

	// The limit was lowered after the read: no hold missed, but over it.
	b = workedExample(t)
	old = b.a.Clone()
	e, err := SetLimit(b.a, gbpLimit("acct-1", 42_500), b.now)
	if err != nil {
		t.Fatal(err)
	}
	b.append(e)
	d, err = Reserve(old, ReserveRequest{OperationKey: "op-C", RequestDigest: digestOf("C"), Amount: 1_000}, b.now)
	if err != nil {
		t.Fatal(err)
	}
	fs := Verify(append(b.events, *d.Event))
	kinds := map[string]bool{}
	for _, f := range fs {
		kinds[f.Kind] = true
	}
	if !kinds[FindingStaleReadMissedHold] || kinds[FindingSeenStateMismatch] { // it saw version 4 as it was
		t.Fatalf("stale read under a lowered limit: %+v", fs)
	}
}

// Accounts are replayed independently, however interleaved.
func TestVerifyInterleavedAccounts(t *testing.T) {
	x := newBook(t, gbpLimit("acct-x", 100))
	y := newBook(t, Limit{Account: "acct-y", Currency: "EUR", Limit: 100, Delegator: "d"})
	var events []Event
	events = append(events, x.events[0], y.events[0])
	x.reserve("op-1", "d1", 60, nil)
	y.reserve("op-1", "d1", 60, nil) // same key on another account: not a retry
	events = append(events, x.events[1], y.events[1])
	if fs := Verify(events); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
	events = append(events, x.events[1]) // x's retry counted twice
	fs := Verify(events)
	kinds := map[string]bool{}
	for _, f := range fs {
		if f.Account != "acct-x" || f.Index != 4 || f.Version != 2 || f.ReadVersion != 1 {
			t.Errorf("finding %+v", f)
		}
		kinds[f.Kind] = true
	}
	if !kinds[FindingDoubleCountedRetry] || !kinds[FindingStaleReadMissedHold] {
		t.Fatalf("findings %+v", fs)
	}
}

func TestVerifyMalformedEvents(t *testing.T) {
	for _, e := range []Event{
		{Kind: "spent", Account: "a"},
		{Kind: Reserved, Account: ""},
		{Kind: Reserved, Account: "a"}, // before any limit, no fields
		{Kind: Settled, Account: "a"},
		{Kind: LimitSet, Account: "a"},
	} {
		fs := Verify([]Event{e})
		if len(fs) == 0 || fs[0].Kind != FindingInvalidEvent || fs[0].Severity != SeverityError {
			t.Errorf("%+v: findings %+v", e, fs)
		}
	}
}
