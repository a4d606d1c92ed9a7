package console

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

func TestNewBar(t *testing.T) {
	for _, c := range []struct {
		name               string
		limit, spent, held int64
		want               bar
	}{
		{"empty", 50000, 0, 0, bar{Free: 100, Limit: 100}},
		{"worked example", 50000, 30000, 12000, bar{Spent: 60, Held: 24, Free: 16, Used: 84, Limit: 100}},
		{"exactly at the limit", 100, 40, 60, bar{Spent: 40, Held: 60, Used: 100, Limit: 100}},
		{"over: scaled to the total", 50000, 30000, 25000, bar{Spent: 55, Held: 45, Over: true, Used: 110, Limit: 91}},
		{"no limit", 0, 10, 0, bar{Spent: 100, Over: true, Limit: 0}},
	} {
		if got := newBar(c.limit, c.spent, c.held); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDecisionMarks(t *testing.T) {
	for _, c := range []struct {
		d              *pb.BudgetDecision
		over, override bool
	}{
		{&pb.BudgetDecision{Outcome: "reserved", WithinLimit: true, Allowed: true}, false, false},
		{&pb.BudgetDecision{Outcome: "denied", WithinLimit: false}, true, false},
		{&pb.BudgetDecision{Outcome: "reserved", WithinLimit: false, Allowed: true, Override: &pb.Override{By: "cfo", Reason: "r"}}, true, true},
		{&pb.BudgetDecision{Outcome: "settled"}, false, false}, // not a limit decision
		{&pb.BudgetDecision{Outcome: "limit_set"}, false, false},
	} {
		v := decisionOf(c.d)
		if v.OverLimit != c.over || v.Override != c.override {
			t.Errorf("%s within=%v: over %v override %v", c.d.GetOutcome(), c.d.GetWithinLimit(), v.OverLimit, v.Override)
		}
	}
}

func TestMoney(t *testing.T) {
	for in, want := range map[int64]string{0: "0.00 GBP", 5: "0.05 GBP", 5000000: "50\u202f000.00 GBP", -1250: "-12.50 GBP"} {
		if got := money(in, "GBP"); got != want {
			t.Errorf("money(%d) = %q, want %q", in, got, want)
		}
	}
	if got := money(1200, "JPY"); got != "1\u202f200 JPY" {
		t.Errorf("JPY: %q", got)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/console/budgets":   "/console/budgets",
		"//evil.example/x":   "/console/",
		"https://evil/":      "/console/",
		"/console\\..\\x":    "/console/",
		"/mcp":               "/console/",
		"/console/find?q=ab": "/console/find?q=ab",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCallers(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	p := filepath.Join(t.TempDir(), "callers.yaml")
	if err := os.WriteFile(p, []byte("alice: {token_sha256: "+hex.EncodeToString(sum[:])+", roles: [approver]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCallers(p)
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := c.Authenticate("s3cret"); !ok || pr.Name != "alice" || !pr.Has(RoleApprover) || pr.Has(RoleFinance) {
		t.Fatalf("got %+v %v", pr, ok)
	}
	for _, tok := range []string{"", "s3cret ", "other"} {
		if _, ok := c.Authenticate(tok); ok {
			t.Fatalf("token %q authenticated", tok)
		}
	}
	for _, bad := range []string{
		"bob: {token_sha256: abc, roles: [approver]}\n",
		"bob: {token_sha256: " + hex.EncodeToString(sum[:]) + ", roles: [root]}\n",
		"bob: {token: x}\n",
	} {
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadCallers(p); err == nil || !strings.Contains(err.Error(), "callers") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func timeAt(sec int64) time.Time { return time.Unix(sec, 0) }

func TestSessionsExpire(t *testing.T) {
	now := timeAt(0)
	s := newSessions(func() time.Time { return now })
	x := s.create(Principal{Name: "alice"})
	if _, ok := s.get(x.id); !ok {
		t.Fatal("fresh session missing")
	}
	now = now.Add(sessionIdleMax + time.Second)
	if _, ok := s.get(x.id); ok {
		t.Fatal("idle session still valid")
	}
	y := s.create(Principal{Name: "bob"})
	for i := 0; i < 20; i++ { // used often, but not forever
		now = now.Add(sessionLifetimeMax / 10)
		s.get(y.id)
	}
	if _, ok := s.get(y.id); ok {
		t.Fatal("session outlived its lifetime")
	}
	if a, b := s.create(Principal{}), s.create(Principal{}); a.id == b.id || a.csrf == b.csrf || len(a.id) < 20 {
		t.Fatal("session ids and csrf tokens must be random")
	}
}
