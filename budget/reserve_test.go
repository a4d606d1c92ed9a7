package budget

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

// Bad input is refused with a clear error and nothing to append.
func TestReserveRefusesBadInput(t *testing.T) {
	ok := ReserveRequest{OperationKey: "op-C", RequestDigest: digestOf("C"), Amount: 1_000}
	with := func(f func(*ReserveRequest)) ReserveRequest { r := ok; f(&r); return r }
	nearFull := func() *Account {
		a := workedExample(t).a.Clone()
		a.Limit = MaxAmount
		a.Spent = math.MaxInt64 - 12_000 - 10 // a state only overrides could reach
		return a
	}
	tests := []struct {
		name string
		acct func() *Account
		req  ReserveRequest
		err  error
	}{
		{"zero amount", nil, with(func(r *ReserveRequest) { r.Amount = 0 }), ErrInvalidAmount},
		{"negative amount", nil, with(func(r *ReserveRequest) { r.Amount = -5 }), ErrInvalidAmount},
		{"amount beyond MaxAmount", nil, with(func(r *ReserveRequest) { r.Amount = MaxAmount + 1 }), ErrInvalidAmount},
		{"missing key", nil, with(func(r *ReserveRequest) { r.OperationKey = "" }), ErrMissingKey},
		{"missing request digest", nil, with(func(r *ReserveRequest) { r.RequestDigest = "" }), ErrInvalidRequest},
		{"control character in key", nil, with(func(r *ReserveRequest) { r.OperationKey = "op\n1" }), ErrInvalidRequest},
		{"override without reason", nil, with(func(r *ReserveRequest) { r.Override = &Override{By: "cfo"} }), ErrInvalidRequest},
		{"currency mismatch", nil, with(func(r *ReserveRequest) { r.Currency = "EUR" }), ErrCurrency},
		{"nil account", func() *Account { return nil }, ok, ErrUnknownAccount},
		{"account without limit", func() *Account { return &Account{} }, ok, ErrUnknownAccount},
		{"key reuse, other digest", nil, with(func(r *ReserveRequest) { r.OperationKey = "op-A" }), ErrKeyReuse},
		{"key reuse, other amount", nil, ReserveRequest{OperationKey: "op-A", RequestDigest: digestOf("A"), Amount: 12_001}, ErrKeyReuse},
		{"closed key reused", nil, ReserveRequest{OperationKey: "op-S", RequestDigest: digestOf("X"), Amount: 30_000}, ErrKeyReuse},
		{"overflow", nearFull, with(func(r *ReserveRequest) { r.Amount = 11 }), ErrOverflow},
		{"broken account", func() *Account { a := workedExample(t).a.Clone(); a.Held = 1; return a }, ok, ErrBrokenInvariant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a *Account
			if tc.acct != nil {
				a = tc.acct()
			} else {
				a = workedExample(t).a
			}
			var before *Account
			if a != nil {
				before = a.Clone()
			}
			d, err := Reserve(a, tc.req, t0)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if d.Event != nil {
				t.Fatal("an error came with an event to append")
			}
			if a != nil && !reflect.DeepEqual(a, before) {
				t.Fatal("the account changed")
			}
		})
	}
}

// An override does not extend a limit beyond its validity, and the refusal
// is recorded: a Denied event with its reason, which folds and verifies.
func TestReserveOutsideValidity(t *testing.T) {
	l := gbpLimit("acct-v", 50_000)
	l.ValidFrom = t0
	l.ValidUntil = t0.Add(24 * time.Hour)
	b := newBook(t, l)
	b.reserve("op-1", digestOf("1"), 1_000, nil)
	for _, at := range []time.Time{t0.Add(-time.Second), t0.Add(24 * time.Hour)} {
		d, err := Reserve(b.a, ReserveRequest{OperationKey: "op-2", RequestDigest: digestOf("2"), Amount: 1, Override: cfo}, at)
		if err != nil || d.Outcome != OutcomeDenied || d.Allowed || d.Reason != ReasonLimitNotValid || d.Event == nil ||
			d.Event.Kind != Denied || d.Event.Reason != ReasonLimitNotValid || d.Event.Override != nil || !d.Event.WithinLimit {
			t.Fatalf("at %s: %+v, %v; want a recorded denial, limit not valid", at, d, err)
		}
		if err := b.a.Apply(*d.Event); err != nil {
			t.Fatalf("the denial does not fold: %v", err)
		}
		b.events = append(b.events, *d.Event)
	}
	for _, f := range Verify(b.events) {
		t.Errorf("verify: %+v", f)
	}
	// The reason belongs to denials only.
	bad := Event{Kind: Reserved, Reason: ReasonLimitNotValid}
	if err := bad.checkUnused(); err == nil {
		t.Error("a reservation with a reason was accepted")
	}
	// A retry still finds its hold after the limit expired.
	d, err := Reserve(b.a, ReserveRequest{OperationKey: "op-1", RequestDigest: digestOf("1"), Amount: 1_000}, t0.Add(48*time.Hour))
	if err != nil || d.Outcome != OutcomeAlreadyHeld || d.Event != nil {
		t.Fatalf("retry after expiry: %+v, %v", d, err)
	}
}

// Retries of closed operations return their outcome; a denial does not bind
// its key, so a retry after funds were released is decided afresh.
func TestReserveRetries(t *testing.T) {
	b := newBook(t, gbpLimit("acct-r", 10_000))
	b.reserve("op-1", digestOf("1"), 6_000, nil)
	b.reserve("op-2", digestOf("2"), 3_000, nil)
	b.settle("op-1", 4_000) // for less: 2 000 released
	b.release("op-2")

	d := b.reserve("op-1", digestOf("1"), 6_000, nil)
	if d.Outcome != OutcomeSpent || d.Event != nil || d.Closed == nil || d.Closed.Spent != 4_000 || d.Closed.Released != 2_000 {
		t.Fatalf("retry of settled op: %+v", d)
	}
	d = b.reserve("op-2", digestOf("2"), 3_000, nil)
	if d.Outcome != OutcomeReleased || d.Event != nil || d.Closed.Evidence.TargetStatus != 404 {
		t.Fatalf("retry of released op: %+v", d)
	}

	b.reserve("op-3", digestOf("3"), 5_000, nil) // 4 000 + 5 000
	version := b.a.Version
	if d := b.reserve("op-4", digestOf("4"), 2_000, nil); d.Outcome != OutcomeDenied || b.a.Version != version+1 || b.a.Held != 5_000 {
		t.Fatalf("denial: %+v, version %d held %d", d, b.a.Version, b.a.Held)
	}
	b.release("op-3")
	if d := b.reserve("op-4", digestOf("4"), 2_000, nil); d.Outcome != OutcomeHeld {
		t.Fatalf("retry after denial and release: %+v", d)
	}
}

func TestReserveTooManyHolds(t *testing.T) {
	b := newBook(t, gbpLimit("acct-many", MaxAmount))
	for i := range MaxOpenHolds {
		k := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		b.reserve(k, digestOf(k), 1, nil)
	}
	_, err := Reserve(b.a, ReserveRequest{OperationKey: "one-more", RequestDigest: "d", Amount: 1}, b.now)
	if !errors.Is(err, ErrTooManyHolds) {
		t.Fatalf("err = %v, want ErrTooManyHolds", err)
	}
}
