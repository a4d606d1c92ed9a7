package budget

import (
	"reflect"
	"testing"
)

// The worked example of docs/design.md §3 and the seed: a copy of the request is
// not a copy of the intent. Retrying op A counts nothing; op B with the same
// content and a new key is counted and goes over the limit.
func TestWorkedExample(t *testing.T) {
	tests := []struct {
		name        string
		req         ReserveRequest
		outcome     Outcome
		total       int64
		withinLimit bool
		allowed     bool
		appended    EventKind // "" when nothing is appended
		heldAfter   int64
	}{
		{
			name:    "retry of op A returns the existing hold",
			req:     ReserveRequest{OperationKey: "op-A", RequestDigest: digestOf("A"), Amount: 12_000},
			outcome: OutcomeAlreadyHeld, total: 42_000, withinLimit: true, allowed: true,
			heldAfter: 12_000,
		},
		{
			name:    "op B with op A's request digest is counted and denied",
			req:     ReserveRequest{OperationKey: "op-B", RequestDigest: digestOf("A"), Amount: 12_000},
			outcome: OutcomeDenied, total: 54_000, withinLimit: false, allowed: false,
			appended: Denied, heldAfter: 12_000,
		},
		{
			name:    "op B with an override is held and still over the limit",
			req:     ReserveRequest{OperationKey: "op-B", RequestDigest: digestOf("A"), Amount: 12_000, Override: cfo},
			outcome: OutcomeHeld, total: 54_000, withinLimit: false, allowed: true,
			appended: Reserved, heldAfter: 24_000,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := workedExample(t)
			if b.a.Spent != 30_000 || b.a.Held != 12_000 || b.a.Limit != 50_000 {
				t.Fatalf("setup: spent %d held %d limit %d", b.a.Spent, b.a.Held, b.a.Limit)
			}
			before := b.a.Clone()
			d, err := Reserve(b.a, tc.req, b.now)
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			if !reflect.DeepEqual(b.a, before) {
				t.Fatal("Reserve changed the account it read")
			}
			if d.Outcome != tc.outcome || d.Total != tc.total || d.WithinLimit != tc.withinLimit || d.Allowed != tc.allowed {
				t.Fatalf("got outcome %s total %d within %t allowed %t; want %s %d %t %t",
					d.Outcome, d.Total, d.WithinLimit, d.Allowed, tc.outcome, tc.total, tc.withinLimit, tc.allowed)
			}
			if tc.appended == "" {
				if d.Event != nil {
					t.Fatalf("a retry appended %s", d.Event.Kind)
				}
				if d.Hold != b.a.Holds["op-A"] {
					t.Fatalf("retry returned %+v, not the existing hold", d.Hold)
				}
			} else {
				e := d.Event
				if e == nil || e.Kind != tc.appended {
					t.Fatalf("event %+v, want %s", e, tc.appended)
				}
				// The decision records everything it saw.
				wantSeen := []Hold{{OperationKey: "op-A", RequestDigest: digestOf("A"), Amount: 12_000}}
				if e.AccountVersion != b.a.Version || e.SpentSeen != 30_000 || e.HeldSeen != 12_000 ||
					!reflect.DeepEqual(e.HeldListSeen, wantSeen) || e.LimitDigest != gbpLimit("acct-1", 50_000).Digest() ||
					e.WithinLimit != tc.withinLimit || e.Allowed != tc.allowed || e.Limit != 50_000 {
					t.Fatalf("event does not record what it saw: %+v", e)
				}
				if (e.Override != nil) != (tc.req.Override != nil) {
					t.Fatalf("override recorded %v, requested %v", e.Override, tc.req.Override)
				}
				b.append(*e)
			}
			if b.a.Held != tc.heldAfter || b.a.Spent != 30_000 {
				t.Fatalf("after: held %d spent %d, want held %d spent 30000", b.a.Held, b.a.Spent, tc.heldAfter)
			}
			// A second retry of op A still counts nothing.
			again, err := Reserve(b.a, ReserveRequest{OperationKey: "op-A", RequestDigest: digestOf("A"), Amount: 12_000}, b.now)
			if err != nil || again.Event != nil || again.Outcome != OutcomeAlreadyHeld {
				t.Fatalf("second retry: %+v, %v", again, err)
			}
		})
	}
}

// The verifier sees the denial and the override, and nothing else.
func TestWorkedExampleVerify(t *testing.T) {
	b := workedExample(t)
	b.reserve("op-A", digestOf("A"), 12_000, nil)
	b.reserve("op-B", digestOf("A"), 12_000, nil)
	b.reserve("op-B", digestOf("A"), 12_000, cfo)
	got := Verify(b.events)
	want := []struct {
		kind string
		sev  Severity
	}{{FindingOverLimit, SeverityInfo}, {FindingOverLimit, SeverityWarning}}
	if len(got) != len(want) {
		t.Fatalf("findings %+v", got)
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Severity != w.sev || got[i].OperationKey != "op-B" {
			t.Errorf("finding %d = %+v, want %s/%s on op-B", i, got[i], w.kind, w.sev)
		}
	}
}
