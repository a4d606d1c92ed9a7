package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
	"github.com/portcullis-dev/portcullis/server"
	"google.golang.org/protobuf/proto"
)

func budgetClient(g *server.Gateway) portcullisv1connect.BudgetServiceClient {
	return portcullisv1connect.NewBudgetServiceClient(http.DefaultClient, "http://"+g.Addr)
}

func budgetStream(t testing.TB, g *server.Gateway) jetstream.Stream {
	t.Helper()
	nc := natsConnect(t, g, natsauth.Finance)
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), keeper.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// budgetEvents reads the whole budget stream as domain events.
func budgetEvents(t testing.TB, s jetstream.Stream) []budget.Event {
	t.Helper()
	var out []budget.Event
	err := ljs.Source{Stream: s}.ReadAll(context.Background(), func(e projector.Entry) error {
		_, ev, err := keeper.DecodeStored(e.Data)
		if err != nil {
			return err
		}
		out = append(out, ev...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// problems are verifier findings beyond information (over-limit denials
// are recorded and reported as information).
func problems(fs []budget.Finding) []budget.Finding {
	var out []budget.Finding
	for _, f := range fs {
		if f.Severity != budget.SeverityInfo {
			out = append(out, f)
		}
	}
	return out
}

func reserve(account, op, digest string, amount int64) *connect.Request[pb.ReserveRequest] {
	return connect.NewRequest(&pb.ReserveRequest{Account: account, OperationKey: op, RequestDigest: digest, Amount: amount})
}

// The worked example of docs/design.md §3, through the Connect API.
func TestBudgetWorkedExample(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := budgetClient(g)
	s := budgetStream(t, g)
	if _, err := c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})); err != nil {
		t.Fatal(err)
	}
	// Spent 30 000: an earlier payment, confirmed.
	mustOK(t)(c.Reserve(ctx, reserve("acme", "op-earlier", "sha256:e", 30_000)))
	mustOK(t)(c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "acme", OperationKey: "op-earlier", Amount: 30_000,
		Evidence: &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 201}})))
	// Op A: 12 000 held; its answer is lost.
	a, err := c.Reserve(ctx, reserve("acme", "op-A", "sha256:same", 12_000))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Msg.GetDecision().GetWithinLimit() || a.Msg.GetAccount().GetHeld() != 12_000 {
		t.Fatalf("op A: %v", a.Msg)
	}
	before := streamCount(t, s)
	retry, err := c.Reserve(ctx, reserve("acme", "op-A", "sha256:same", 12_000))
	if err != nil {
		t.Fatal(err)
	}
	d, acct := retry.Msg.GetDecision(), retry.Msg.GetAccount()
	if d.GetOutcome() != string(budget.OutcomeAlreadyHeld) || !d.GetWithinLimit() || d.GetTotal() != 42_000 ||
		acct.GetSpent()+acct.GetHeld() != 42_000 || streamCount(t, s) != before {
		t.Fatalf("retry of op A: %v (spent+held %d), %d new events", retry.Msg, acct.GetSpent()+acct.GetHeld(), streamCount(t, s)-before)
	}
	// Op B, identical content, new operation: counted, over the limit, denied and recorded.
	b, err := c.Reserve(ctx, reserve("acme", "op-B", "sha256:same", 12_000))
	if err != nil {
		t.Fatal(err)
	}
	d = b.Msg.GetDecision()
	if d.GetOutcome() != string(budget.Denied) || d.GetWithinLimit() || d.GetAllowed() || d.GetTotal() != 54_000 || b.Msg.GetAccount().GetHeld() != 12_000 {
		t.Fatalf("op B: %v", b.Msg)
	}
	list, err := c.ListDecisions(ctx, connect.NewRequest(&pb.ListDecisionsRequest{Account: "acme", PageSize: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.GetDecisions()) != 1 || list.Msg.GetDecisions()[0].GetOutcome() != "denied" || list.Msg.GetNextPageToken() == "" {
		t.Fatalf("denial not recorded first in the decision list: %v", list.Msg)
	}
	// With an override: held, and the record still says over the limit.
	req := reserve("acme", "op-B", "sha256:same", 12_000)
	req.Msg.Override = &pb.Override{Reason: "quarter-end"} // by: the caller
	o, err := c.Reserve(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	d = o.Msg.GetDecision()
	if d.GetOutcome() != string(budget.Reserved) || d.GetWithinLimit() || !d.GetAllowed() || d.GetOverride().GetBy() != auth.LocalOperator || o.Msg.GetAccount().GetHeld() != 24_000 {
		t.Fatalf("override: %v", o.Msg)
	}
	holds, err := c.ListHolds(ctx, connect.NewRequest(&pb.ListHoldsRequest{Account: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(holds.Msg.GetHolds()) != 2 || holds.Msg.GetHeld() != 24_000 {
		t.Fatalf("holds: %v", holds.Msg)
	}
	if fs := problems(budget.Verify(budgetEvents(t, s))); len(fs) != 1 || fs[0].Kind != "over_limit" || fs[0].Severity != budget.SeverityWarning {
		t.Fatalf("verifier should warn exactly about the override: %+v", fs)
	}
}

func TestBudgetSettleReleaseAndBadInput(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := budgetClient(g)
	s := budgetStream(t, g)
	mustOK(t)(c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "ops", Limit: 10_000, Currency: "EUR"})))
	for _, op := range []string{"p1", "p2", "p3"} {
		mustOK(t)(c.Reserve(ctx, reserve("ops", op, "sha256:"+op, 2_000)))
	}
	ev := &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200}
	// Settle for less releases the rest.
	res, err := c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "ops", OperationKey: "p1", Amount: 1_500, Evidence: ev}))
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Msg.GetAccount(); a.GetSpent() != 1_500 || a.GetHeld() != 4_000 || res.Msg.GetDecision().GetRemainder() != 500 {
		t.Fatalf("settle for less: %v", res.Msg)
	}
	rel, err := c.Release(ctx, connect.NewRequest(&pb.ReleaseRequest{Account: "ops", OperationKey: "p2", Evidence: &pb.Evidence{TargetStatus: 404, Note: "status endpoint: no such payment"}}))
	if err != nil {
		t.Fatal(err)
	}
	if a := rel.Msg.GetAccount(); a.GetHeld() != 2_000 || a.GetSpent() != 1_500 {
		t.Fatalf("release: %v", rel.Msg)
	}
	// p3's outcome is unknown: nothing moves its hold.
	acc, err := c.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "ops"}))
	if err != nil {
		t.Fatal(err)
	}
	if acc.Msg.GetAccount().GetHeld() != 2_000 || acc.Msg.GetAccount().GetLimitDigest() == "" || acc.Msg.GetAccount().GetVersion() != 6 {
		t.Fatalf("account: %v", acc.Msg)
	}

	before := streamCount(t, s)
	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"zero amount", func() error { _, err := c.Reserve(ctx, reserve("ops", "x", "sha256:x", 0)); return err }, connect.CodeInvalidArgument},
		{"negative amount", func() error { _, err := c.Reserve(ctx, reserve("ops", "x", "sha256:x", -5)); return err }, connect.CodeInvalidArgument},
		{"overflow", func() error { _, err := c.Reserve(ctx, reserve("ops", "x", "sha256:x", 1<<62)); return err }, connect.CodeInvalidArgument},
		{"unknown account", func() error { _, err := c.Reserve(ctx, reserve("nobody", "x", "sha256:x", 5)); return err }, connect.CodeNotFound},
		{"bad account name", func() error { _, err := c.Reserve(ctx, reserve("a.b>", "x", "sha256:x", 5)); return err }, connect.CodeInvalidArgument},
		{"missing key", func() error { _, err := c.Reserve(ctx, reserve("ops", "", "sha256:x", 5)); return err }, connect.CodeInvalidArgument},
		{"currency mismatch", func() error {
			r := reserve("ops", "x", "sha256:x", 5)
			r.Msg.Currency = "USD"
			_, err := c.Reserve(ctx, r)
			return err
		}, connect.CodeInvalidArgument},
		{"key reuse", func() error { _, err := c.Reserve(ctx, reserve("ops", "p3", "sha256:other", 2_000)); return err }, connect.CodeAlreadyExists},
		{"settle more than held", func() error {
			_, err := c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "ops", OperationKey: "p3", Amount: 9_000, Evidence: ev}))
			return err
		}, connect.CodeInvalidArgument},
		{"settle closed", func() error {
			_, err := c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "ops", OperationKey: "p2", Amount: 1, Evidence: ev}))
			return err
		}, connect.CodeFailedPrecondition},
		{"currency change", func() error {
			_, err := c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "ops", Limit: 1, Currency: "USD"}))
			return err
		}, connect.CodeInvalidArgument},
	} {
		if err := tc.call(); connect.CodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.code)
		}
	}
	if after := streamCount(t, s); after != before {
		t.Fatalf("bad input appended %d events", after-before)
	}
}

// Two gateways, 200 concurrent reservations of random amounts on one
// account: the limit is never over-committed, the holds sum to the
// reserved total, and the verifier finds nothing wrong.
func TestBudgetConcurrentTwoGateways(t *testing.T) {
	ctx := context.Background()
	g1 := startGateway(t, "", nil)
	g2 := startGateway(t, g1.NatsURL, nil)
	cs := []portcullisv1connect.BudgetServiceClient{budgetClient(g1), budgetClient(g2)}
	const limit = 100_000
	mustOK(t)(cs[0].SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "hot", Limit: limit, Currency: "USD"})))
	var mu sync.Mutex
	var allowed int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			amount := int64(100 + rand.IntN(1500))
			res, err := cs[i%2].Reserve(ctx, reserve("hot", fmt.Sprintf("op-%d", i), fmt.Sprintf("sha256:%d", i), amount))
			if err != nil {
				t.Error(err)
				return
			}
			if res.Msg.GetDecision().GetAllowed() {
				mu.Lock()
				allowed += amount
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if allowed > limit {
		t.Fatalf("allowed %d over a limit of %d without an override", allowed, limit)
	}
	h, err := cs[1].ListHolds(ctx, connect.NewRequest(&pb.ListHoldsRequest{Account: "hot"}))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, x := range h.Msg.GetHolds() {
		sum += x.GetAmount()
	}
	acc, err := cs[0].GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "hot"}))
	if err != nil {
		t.Fatal(err)
	}
	if sum != allowed || h.Msg.GetHeld() != allowed || acc.Msg.GetAccount().GetHeld() != allowed {
		t.Fatalf("holds sum %d, held %d/%d, allowed %d", sum, h.Msg.GetHeld(), acc.Msg.GetAccount().GetHeld(), allowed)
	}
	if fs := problems(budget.Verify(budgetEvents(t, budgetStream(t, g1)))); len(fs) != 0 {
		t.Fatalf("verifier: %+v", fs)
	}
}

// A decision appended without its condition, having read an old version,
// is flagged by the verifier; the clean stream before it is not. The
// projector refuses to fold it.
func TestBudgetVerifierFlagsStaleDecision(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := budgetClient(g)
	s := budgetStream(t, g)
	mustOK(t)(c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 20_000, Currency: "GBP"})))
	old, err := g.Keeper.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t)(c.Reserve(ctx, reserve("acme", "op-A", "sha256:a", 15_000)))
	if fs := problems(budget.Verify(budgetEvents(t, s))); len(fs) != 0 {
		t.Fatalf("clean stream flagged: %+v", fs)
	}
	// A gateway that read version 1 decides op-B without seeing op-A's hold
	// and appends without compare-and-set.
	stale, err := budget.Reserve(old.Account, budget.ReserveRequest{OperationKey: "op-B", RequestDigest: "sha256:b", Amount: 15_000}, time.Now())
	if err != nil || stale.Event == nil {
		t.Fatal(err)
	}
	last := subjectLast(t, s, keeper.Subject("acme"))
	ev := &pb.Event{EventId: "evt_stale", Type: keeper.EventType(stale.Event.Kind), Subject: keeper.Subject("acme"),
		GatewayId: "gw-rogue", Body: &pb.Event_BudgetChanged{BudgetChanged: keeper.ToProto(*stale.Event)}}
	ledger.Seal(ev, last.GetHash())
	data, _ := proto.Marshal(ev)
	nc := natsConnect(t, g, natsauth.Gateway) // a rogue writer with stolen gateway credentials
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, keeper.Subject("acme"), data); err != nil {
		t.Fatal(err)
	}
	fs := problems(budget.Verify(budgetEvents(t, s)))
	found := false
	for _, f := range fs {
		found = found || (f.Kind == "stale_read_missed_hold" && f.OperationKey == "op-B")
	}
	if !found {
		t.Fatalf("stale decision not flagged: %+v", fs)
	}
}

func subjectLast(t testing.TB, s jetstream.Stream, subject string) *pb.Event {
	t.Helper()
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	ev := new(pb.Event)
	if err := proto.Unmarshal(m.Data, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}
