package console

import (
	"crypto/sha256"
	"encoding/hex"
	"google.golang.org/protobuf/proto"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/types/known/timestamppb"
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
		{&pb.BudgetDecision{Outcome: "reserved", WithinLimit: proto.Bool(true), Allowed: proto.Bool(true)}, false, false},
		{&pb.BudgetDecision{Outcome: "denied", WithinLimit: proto.Bool(false)}, true, false},
		{&pb.BudgetDecision{Outcome: "reserved", WithinLimit: proto.Bool(false), Allowed: proto.Bool(true), Override: &pb.Override{By: "cfo", Reason: "r"}}, true, true},
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

func TestSignIn(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	a, err := auth.New([]auth.Caller{{Name: "alice", TokenSHA256: hex.EncodeToString(sum[:]), Roles: []auth.Role{auth.Approver}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	from := func(remote string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/console/login", nil)
		r.RemoteAddr = remote
		return r
	}
	c := &Console{d: Deps{Auth: a}}
	if pr, ok := c.signIn(from("192.0.2.7:4000"), "s3cret"); !ok || pr.Name != "alice" || !hasAny(pr, actApprovals) || hasAny(pr, viewBudgets) {
		t.Fatalf("got %+v %v", pr, ok)
	}
	for _, tok := range []string{"", "s3cret ", "other", "s3cret\nx"} {
		if _, ok := c.signIn(from("127.0.0.1:4000"), tok); ok {
			t.Fatalf("token %q signed in", tok)
		}
	}

	// Without callers: the local operator, from this machine only.
	local, err := auth.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = &Console{d: Deps{Auth: local}}
	for _, remote := range []string{"127.0.0.1:4000", "[::1]:4000"} {
		if pr, ok := c.signIn(from(remote), ""); !ok || pr.Name != auth.LocalOperator || !hasAny(pr, actApprovals) || !hasAny(pr, viewBudgets) {
			t.Fatalf("%s: got %+v %v", remote, pr, ok)
		}
	}
	for _, remote := range []string{"192.0.2.7:4000", "garbage"} {
		if _, ok := c.signIn(from(remote), ""); ok {
			t.Fatalf("local operator signed in from %s", remote)
		}
	}
}

func timeAt(sec int64) time.Time { return time.Unix(sec, 0) }

func TestSessionsExpire(t *testing.T) {
	now := timeAt(0)
	s := newSessions(func() time.Time { return now })
	x := s.create(&auth.Principal{Name: "alice"})
	if _, ok := s.get(x.id); !ok {
		t.Fatal("fresh session missing")
	}
	now = now.Add(sessionIdleMax + time.Second)
	if _, ok := s.get(x.id); ok {
		t.Fatal("idle session still valid")
	}
	y := s.create(&auth.Principal{Name: "bob"})
	for i := 0; i < 20; i++ { // used often, but not forever
		now = now.Add(sessionLifetimeMax / 10)
		s.get(y.id)
	}
	if _, ok := s.get(y.id); ok {
		t.Fatal("session outlived its lifetime")
	}
	if a, b := s.create(&auth.Principal{}), s.create(&auth.Principal{}); a.id == b.id || a.csrf == b.csrf || len(a.id) < 20 {
		t.Fatal("session ids and csrf tokens must be random")
	}
}

// Overdue is read from the dispatch_deadline the DISPATCHED event
// recorded; an execution recorded before deadlines were falls back to
// dispatched_at + the tool's timeout + grace (ledger.DispatchDeadline).
func TestOverdueFromDispatchDeadline(t *testing.T) {
	sent := timeAt(1_000_000)
	now := sent.Add(2 * time.Minute)
	c := &Console{d: Deps{Contracts: contract.Book{"slow": {Timeout: 10 * time.Minute}}}, now: func() time.Time { return now }}
	x := func(tool string, deadline time.Time) *pb.Execution {
		e := &pb.Execution{ExecutionId: "act_1", Tool: tool, State: pb.State_STATE_DISPATCHED, DispatchedAt: timestamppb.New(sent)}
		if !deadline.IsZero() {
			e.DispatchDeadline = timestamppb.New(deadline)
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		x        *pb.Execution
		deadline time.Time
		overdue  bool
	}{
		// The recorded deadline decides, whatever the contract says now.
		{"recorded, passed", x("slow", sent.Add(time.Minute)), sent.Add(time.Minute), true},
		{"recorded, ahead", x("fast", sent.Add(time.Hour)), sent.Add(time.Hour), false},
		// Without one: the contract's timeout (or the default) + grace.
		{"legacy, long timeout", x("slow", time.Time{}), sent.Add(10*time.Minute + ledger.DispatchGrace), false},
		{"legacy, default timeout", x("fast", time.Time{}), sent.Add(contract.DefaultTimeout + ledger.DispatchGrace), true},
	} {
		v := c.view(tc.x)
		if !v.Deadline.Equal(tc.deadline) || v.Overdue != tc.overdue {
			t.Errorf("%s: deadline %v overdue %v, want %v %v", tc.name, v.Deadline, v.Overdue, tc.deadline, tc.overdue)
		}
	}
}
