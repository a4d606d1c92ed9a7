package test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Closed operations are rows of their own in the views, not part of the
// account row: the row stays small however long the history, and a late
// retry still finds its operation's outcome, on the gateway that closed it
// and on one that only has the views.
func TestBudgetLateRetryFindsClosedOperation(t *testing.T) {
	ctx := context.Background()
	g1 := startGateway(t, "", nil)
	g2 := startGateway(t, g1.NatsURL, nil)
	c1, c2 := budgetClient(g1), budgetClient(g2)
	mustOK(t)(c1.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	ev := &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200}
	mustOK(t)(c1.Reserve(ctx, reserve("acme", "op-paid", "sha256:a", 1_000)))
	mustOK(t)(c1.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "acme", OperationKey: "op-paid", Amount: 1_000, Evidence: ev})))
	mustOK(t)(c1.Reserve(ctx, reserve("acme", "op-freed", "sha256:b", 500)))
	mustOK(t)(c1.Release(ctx, connect.NewRequest(&pb.ReleaseRequest{Account: "acme", OperationKey: "op-freed", Evidence: ev})))
	for i := range 20 {
		op := fmt.Sprintf("op-%d", i)
		mustOK(t)(c1.Reserve(ctx, reserve("acme", op, "sha256:c", 10)))
		mustOK(t)(c1.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "acme", OperationKey: op, Amount: 10, Evidence: ev})))
	}
	const spent = 1_000 + 20*10
	// The other gateway answers a retry of a closed operation from its
	// views, with the account as they hold it (its version says how
	// fresh): let them reach the last settlement first.
	info, err := budgetStream(t, g1).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Views.BudgetWaitFor(ctx, info.State.LastSeq); err != nil {
		t.Fatal(err)
	}

	for _, gc := range []struct {
		name string
		c    interface {
			Reserve(context.Context, *connect.Request[pb.ReserveRequest]) (*connect.Response[pb.ReserveResponse], error)
		}
	}{{"closing gateway", c1}, {"other gateway", c2}} {
		for _, x := range []struct {
			op, digest string
			amount     int64
			want       budget.Outcome
		}{{"op-paid", "sha256:a", 1_000, budget.OutcomeSpent}, {"op-freed", "sha256:b", 500, budget.OutcomeReleased}, {"op-7", "sha256:c", 10, budget.OutcomeSpent}} {
			op, want := x.op, x.want
			r, err := gc.c.Reserve(ctx, reserve("acme", op, x.digest, x.amount))
			if err != nil {
				t.Fatalf("%s: retry of %s: %v", gc.name, op, err)
			}
			if got := r.Msg.GetDecision().GetOutcome(); got != string(want) {
				t.Errorf("%s: retry of %s: outcome %q, want %q", gc.name, op, got, want)
			}
			if a := r.Msg.GetAccount(); a.GetSpent() != spent || a.GetHeld() != 0 {
				t.Errorf("%s: retry of %s: spent %d held %d, want %d and 0", gc.name, op, a.GetSpent(), a.GetHeld(), spent)
			}
		}
	}
	// A second settlement of a spent operation moves nothing.
	if _, err := c2.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "acme", OperationKey: "op-paid", Amount: 1_000, Evidence: ev})); err == nil {
		t.Error("second settle of op-paid accepted")
	}
	got, err := c2.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Msg.GetAccount(); a.GetSpent() != spent || a.GetHeld() != 0 {
		t.Errorf("account spent %d held %d, want %d and 0", a.GetSpent(), a.GetHeld(), spent)
	}

	// The views' account row carries no closed operations; each is a row.
	h, err := g1.Views.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.Account.Closed); n != 0 {
		t.Errorf("account row holds %d closed operations, want 0", n)
	}
	c, ok, err := g1.Views.ClosedOp(ctx, "acme", "op-freed")
	if err != nil || !ok || c.State != budget.HoldReleased || c.Hold.Amount != 500 {
		t.Errorf("closed op-freed: %+v %v %v", c, ok, err)
	}
}
