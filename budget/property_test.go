package budget

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A world is a few accounts driven only through the decision functions and
// Apply, their events interleaved in one stream, and a model of what each
// account must hold.
type world struct {
	books    map[string]*book
	models   map[string]*model
	names    []string
	stream   []Event
	expected []expectedFinding // over_limit findings Verify must report
	keys     int
}

type model struct {
	holds   map[string]Hold
	closed  map[string]Closed
	denied  map[string]Hold // keys whose last decision was a denial (not bound)
	spent   int64
	excused bool // an override or a lowered limit may put spent+held over the limit
}

type expectedFinding struct {
	index int
	sev   Severity
}

func newWorld(t *rapid.T) *world {
	w := &world{books: map[string]*book{}, models: map[string]*model{}}
	for i, cur := range []string{"GBP", "EUR"}[:rapid.IntRange(1, 2).Draw(t, "accounts")] {
		name := fmt.Sprintf("acct-%d", i)
		l := Limit{Account: name, Currency: cur, Limit: rapid.Int64Range(0, 100_000).Draw(t, "limit"), Delegator: "finance"}
		b := newBook(t, l)
		w.books[name] = b
		w.models[name] = &model{holds: map[string]Hold{}, closed: map[string]Closed{}, denied: map[string]Hold{}}
		w.names = append(w.names, name)
		w.stream = append(w.stream, b.events...)
	}
	return w
}

func (w *world) append(b *book, e Event) {
	b.append(e)
	w.stream = append(w.stream, e)
}

func (w *world) newKey() string {
	w.keys++
	return fmt.Sprintf("op-%03d", w.keys)
}

func pick[V any](t *rapid.T, m map[string]V, label string) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	return rapid.SampledFrom(slices.Sorted(maps.Keys(m))).Draw(t, label), true
}

func (m *model) held() int64 {
	var s int64
	for _, h := range m.holds {
		s += h.Amount
	}
	return s
}

// decide runs a reservation that is not a retry and checks it against the
// model.
func (w *world) decide(t *rapid.T, name string, h Hold, o *Override) {
	b, m := w.books[name], w.models[name]
	d, err := Reserve(b.a, ReserveRequest{OperationKey: h.OperationKey, RequestDigest: h.RequestDigest, Amount: h.Amount, Override: o}, b.now)
	if err != nil {
		t.Fatalf("Reserve(%+v): %v", h, err)
	}
	total := m.spent + m.held() + h.Amount
	within := total <= b.a.Limit
	if d.Event == nil || d.Total != total || d.WithinLimit != within || d.Event.WithinLimit != within {
		t.Fatalf("decision %+v, want total %d within %t", d, total, within)
	}
	switch {
	case within:
		if d.Outcome != OutcomeHeld || d.Event.Kind != Reserved || d.Event.Override != nil {
			t.Fatalf("within the limit: %+v", d)
		}
	case o != nil:
		if d.Outcome != OutcomeHeld || d.Event.Kind != Reserved || d.Event.Override == nil || !d.Allowed {
			t.Fatalf("override beyond the limit: %+v", d)
		}
		m.excused = true
		w.expected = append(w.expected, expectedFinding{len(w.stream), SeverityWarning})
	default:
		if d.Outcome != OutcomeDenied || d.Event.Kind != Denied || d.Allowed {
			t.Fatalf("beyond the limit: %+v", d)
		}
		w.expected = append(w.expected, expectedFinding{len(w.stream), SeverityInfo})
	}
	w.append(b, *d.Event)
	if d.Outcome == OutcomeHeld {
		m.holds[h.OperationKey] = h
		delete(m.denied, h.OperationKey)
	} else {
		m.denied[h.OperationKey] = h
	}
}

func (w *world) step(t *rapid.T) {
	name := rapid.SampledFrom(w.names).Draw(t, "account")
	b, m := w.books[name], w.models[name]
	before := b.a.Clone()
	unchanged := func(what string) {
		if !reflect.DeepEqual(b.a, before) {
			t.Fatalf("%s changed the account", what)
		}
	}
	var override *Override
	if rapid.IntRange(0, 3).Draw(t, "override?") == 0 {
		override = cfo
	}
	limit := b.a.Limit
	switch rapid.IntRange(0, 10).Draw(t, "command") {
	case 0, 1: // a new payment; sometimes with the content of an open one
		digest := digestOf(fmt.Sprint(w.keys + 1))
		if k, ok := pick(t, m.holds, "same content as"); ok && rapid.Bool().Draw(t, "copy content") {
			digest = m.holds[k].RequestDigest
		}
		amount := rapid.OneOf(rapid.Int64Range(1, limit/4+1), rapid.Int64Range(1, limit+1)).Draw(t, "amount")
		w.decide(t, name, Hold{OperationKey: w.newKey(), RequestDigest: digest, Amount: amount}, override)
	case 2: // a genuine retry of an open or closed operation
		if k, ok := pick(t, m.holds, "retry held"); ok && rapid.Bool().Draw(t, "held or closed") {
			h := m.holds[k]
			d, err := Reserve(b.a, ReserveRequest{OperationKey: k, RequestDigest: h.RequestDigest, Amount: h.Amount, Override: override}, b.now)
			if err != nil || d.Event != nil || d.Outcome != OutcomeAlreadyHeld || d.Hold != h || d.Total != m.spent+m.held() {
				t.Fatalf("retry of held %s: %+v, %v", k, d, err)
			}
		} else if k, ok := pick(t, m.closed, "retry closed"); ok {
			c := m.closed[k]
			d, err := Reserve(b.a, ReserveRequest{OperationKey: k, RequestDigest: c.Hold.RequestDigest, Amount: c.Hold.Amount}, b.now)
			want := OutcomeSpent
			if c.State == HoldReleased {
				want = OutcomeReleased
			}
			if err != nil || d.Event != nil || d.Outcome != want || d.Closed == nil || d.Closed.Spent != c.Spent {
				t.Fatalf("retry of closed %s: %+v, %v", k, d, err)
			}
		}
		unchanged("a retry")
	case 3: // the key reused for a different request
		if k, ok := pick(t, m.holds, "reuse"); ok {
			_, err := Reserve(b.a, ReserveRequest{OperationKey: k, RequestDigest: "sha256:other", Amount: m.holds[k].Amount}, b.now)
			if !errors.Is(err, ErrKeyReuse) {
				t.Fatalf("key reuse: %v", err)
			}
			unchanged("key reuse")
		}
	case 4, 5: // settle, in full or for less
		if k, ok := pick(t, m.holds, "settle"); ok {
			h := m.holds[k]
			amount := h.Amount
			if rapid.Bool().Draw(t, "for less") {
				amount = rapid.Int64Range(1, h.Amount).Draw(t, "settled")
			}
			e, err := Settle(b.a, k, amount, evidenceFor(k), b.now)
			if err != nil {
				t.Fatalf("Settle: %v", err)
			}
			w.append(b, e)
			delete(m.holds, k)
			m.spent += amount
			m.closed[k] = Closed{Hold: h, State: HoldSpent, Spent: amount, Released: h.Amount - amount}
		}
	case 6: // release
		if k, ok := pick(t, m.holds, "release"); ok {
			e, err := Release(b.a, k, Evidence{TargetStatus: 404}, b.now)
			if err != nil {
				t.Fatalf("Release: %v", err)
			}
			w.append(b, e)
			m.closed[k] = Closed{Hold: m.holds[k], State: HoldReleased, Released: m.holds[k].Amount}
			delete(m.holds, k)
		}
	case 7: // moving what is not held
		k, ok := pick(t, m.closed, "settle closed")
		want := ErrAlreadyClosed
		if !ok || rapid.Bool().Draw(t, "unknown") {
			k, want = "op-never", ErrNotHeld
		}
		if _, err := Settle(b.a, k, 1, evidenceFor(k), b.now); !errors.Is(err, want) {
			t.Fatalf("Settle(%s): %v, want %v", k, err, want)
		}
		if _, err := Release(b.a, k, evidenceFor(k), b.now); !errors.Is(err, want) {
			t.Fatalf("Release(%s): %v, want %v", k, err, want)
		}
		unchanged("a refused settlement")
	case 8: // bad input
		bad := []struct {
			r   ReserveRequest
			err error
		}{
			{ReserveRequest{OperationKey: "op-x", RequestDigest: "d", Amount: -rapid.Int64Range(0, MaxAmount).Draw(t, "neg")}, ErrInvalidAmount},
			{ReserveRequest{OperationKey: "", RequestDigest: "d", Amount: 1}, ErrMissingKey},
			{ReserveRequest{OperationKey: "op-x", RequestDigest: "d", Amount: 1, Currency: "JPY"}, ErrCurrency},
		}
		c := bad[rapid.IntRange(0, len(bad)-1).Draw(t, "bad")]
		if d, err := Reserve(b.a, c.r, b.now); !errors.Is(err, c.err) || d.Event != nil {
			t.Fatalf("bad input %+v: %v", c.r, err)
		}
		unchanged("bad input")
	case 9: // a new limit
		l := b.a.Terms()
		l.Limit = rapid.Int64Range(0, 100_000).Draw(t, "new limit")
		e, err := SetLimit(b.a, l, b.now)
		if err != nil {
			t.Fatalf("SetLimit: %v", err)
		}
		if l.Limit < m.spent+m.held() {
			m.excused = true
		}
		w.append(b, e)
	case 10: // a retry of a denied operation is decided afresh
		if k, ok := pick(t, m.denied, "denied"); ok {
			w.decide(t, name, m.denied[k], override)
		}
	}
	w.check(t, name)
}

func (w *world) check(t *rapid.T, name string) {
	b, m := w.books[name], w.models[name]
	a := b.a
	var sum int64
	for _, h := range a.Holds {
		sum += h.Amount
	}
	if sum != a.Held {
		t.Fatalf("held %d, open holds sum to %d", a.Held, sum)
	}
	if !maps.Equal(a.Holds, m.holds) || a.Spent != m.spent {
		t.Fatalf("account holds %v spent %d; model %v spent %d", a.Holds, a.Spent, m.holds, m.spent)
	}
	for k, c := range m.closed {
		got := a.Closed[k]
		if got.Hold != c.Hold || got.State != c.State || got.Spent != c.Spent || got.Released != c.Released {
			t.Fatalf("closed %s: %+v, want %+v", k, got, c)
		}
	}
	if a.Version != uint64(len(b.events)) {
		t.Fatalf("version %d after %d events", a.Version, len(b.events))
	}
	if !m.excused && a.Spent+a.Held > a.Limit {
		t.Fatalf("spent %d + held %d over limit %d without an override", a.Spent, a.Held, a.Limit)
	}
}

// Sequences built by the decision functions keep every invariant, fold back
// to the same accounts (also through the JSON codec), and Verify reports
// exactly their over-limit decisions.
func TestPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			w.step(t)
		}
		for _, name := range w.names {
			b := w.books[name]
			folded, err := Fold(b.events)
			if err != nil || !reflect.DeepEqual(folded, b.a) {
				t.Fatalf("Fold: %v\n got %+v\nwant %+v", err, folded, b.a)
			}
			decoded := make([]Event, len(b.events))
			for i, e := range b.events {
				raw, err := MarshalEvent(e)
				if err != nil {
					t.Fatal(err)
				}
				if decoded[i], err = DecodeEvent(raw); err != nil {
					t.Fatalf("DecodeEvent(%s): %v", raw, err)
				}
			}
			if folded, err = Fold(decoded); err != nil || !reflect.DeepEqual(folded, b.a) {
				t.Fatalf("Fold after JSON round trip: %v", err)
			}
		}
		fs := Verify(w.stream)
		if len(fs) != len(w.expected) {
			t.Fatalf("findings %+v\nwant over_limit at %+v", fs, w.expected)
		}
		for i, f := range fs {
			if f.Kind != FindingOverLimit || f.Index != w.expected[i].index || f.Severity != w.expected[i].sev {
				t.Fatalf("finding %+v, want over_limit/%s at %d", f, w.expected[i].sev, w.expected[i].index)
			}
		}
	})
}

// A decision built from an older snapshot of the account, appended after a
// newer hold, is refused by Apply and flagged by Verify with the hold it
// missed.
func TestPropertyVerifyFlagsStaleDecision(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		name := w.names[0]
		for range rapid.IntRange(0, 30).Draw(t, "before") {
			w.step(t)
		}
		b := w.books[name]
		snapshot := b.a.Clone()

		newer := w.newKey()
		w.decide(t, name, Hold{OperationKey: newer, RequestDigest: digestOf(newer), Amount: rapid.Int64Range(1, 10_000).Draw(t, "newer")}, cfo)
		for range rapid.IntRange(0, 5).Draw(t, "more") {
			k := w.newKey()
			w.decide(t, name, Hold{OperationKey: k, RequestDigest: digestOf(k), Amount: rapid.Int64Range(1, 10_000).Draw(t, "amount")}, nil)
		}
		clean := Verify(w.stream)
		for _, f := range clean {
			if f.Kind != FindingOverLimit {
				t.Fatalf("stream before the injection: %+v", f)
			}
		}

		var o *Override
		if rapid.Bool().Draw(t, "stale override") {
			o = cfo
		}
		stale := w.newKey()
		d, err := Reserve(snapshot, ReserveRequest{OperationKey: stale, RequestDigest: digestOf(newer), Amount: rapid.Int64Range(1, 10_000).Draw(t, "stale amount"), Override: o}, b.now)
		if err != nil || d.Event == nil {
			t.Fatalf("Reserve on the snapshot: %+v, %v", d, err)
		}
		if err := b.a.Clone().Apply(*d.Event); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("Apply accepted a stale decision: %v", err)
		}
		fs := Verify(append(w.stream, *d.Event))
		for _, f := range fs {
			if f.Index == len(w.stream) && f.Kind == FindingStaleReadMissedHold && strings.Contains(f.Detail, newer) {
				return
			}
		}
		t.Fatalf("stale decision on %s missing %s not flagged: %+v", stale, newer, fs[len(clean):])
	})
}

// HoldsAre answers what comparing with OpenHolds answers, for any list:
// drawn from the open holds and from holds that are not open, reordered,
// repeated, changed in amount or digest.
func TestPropertyHoldsAreOpenHolds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.StringMatching(`k[a-d]{1,2}`), 0, 6, rapid.ID[string]).Draw(t, "open")
		a := &Account{Holds: map[string]Hold{}}
		for i, k := range keys {
			a.Holds[k] = Hold{OperationKey: k, RequestDigest: digestOf(k), Amount: int64(i + 1)}
		}
		var list []Hold
		if rapid.Bool().Draw(t, "start from the open holds") {
			list = a.OpenHolds()
		}
		for range rapid.IntRange(0, 3).Draw(t, "edits") {
			h := Hold{OperationKey: rapid.StringMatching(`k[a-d]{1,2}`).Draw(t, "key"), Amount: rapid.Int64Range(1, 7).Draw(t, "amount")}
			h.RequestDigest = digestOf(h.OperationKey)
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0:
				list = append(list, h)
			case op == 1 && len(list) > 0:
				list = slices.Delete(list, 0, 1)
			case op == 2 && len(list) > 1:
				list[0], list[1] = list[1], list[0]
			case op == 3 && len(list) > 0:
				list[len(list)-1].RequestDigest = "sha256:other"
			}
		}
		if got, want := a.HoldsAre(list), slices.Equal(list, a.OpenHolds()); got != want {
			t.Fatalf("HoldsAre(%v) = %v, comparing with the open holds %v gives %v", list, got, a.OpenHolds(), want)
		}
	})
}
