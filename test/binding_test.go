package test

import (
	"context"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/fingerprint"
	"github.com/portcullis-dev/portcullis/ledger"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Executions of a budget-bound tool hold, settle and release through their
// own lifecycle: an attached retry never takes a second hold, a success
// settles, a proven absence releases, an unknown outcome keeps the hold, a
// denial by the budget denies the execution.
func TestBudgetBoundExecutions(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c, b := client(g), budgetClient(g)
	mustOK(t)(b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	account := func() *pb.Account {
		t.Helper()
		a, err := b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acme"}))
		if err != nil {
			t.Fatal(err)
		}
		return a.Msg.GetAccount()
	}
	pay := func(op string, amount int, id string) *pb.BeginResponse {
		t.Helper()
		res, err := c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "acme", "amount": amount, "invoice": op}), op, id))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}

	a := pay("op-A", 12_000, "1")
	if a.GetDecision() != pb.Decision_DECISION_NEW || a.GetExecution().GetBudgetOperationKey() != "op-A" || account().GetHeld() != 12_000 {
		t.Fatalf("op A: %v, held %d", a, account().GetHeld())
	}
	if r := pay("op-A", 12_000, "2"); r.GetDecision() != pb.Decision_DECISION_ATTACHED || account().GetHeld() != 12_000 {
		t.Fatalf("retry took a second hold: held %d", account().GetHeld())
	}
	id := a.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	res, err := c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201}))
	if err != nil {
		t.Fatal(err)
	}
	if acc := account(); acc.GetSpent() != 12_000 || acc.GetHeld() != 0 || res.Msg.GetExecution().GetBudgetOutcome() != "spent" {
		t.Fatalf("after success: %v, outcome %q", acc, res.Msg.GetExecution().GetBudgetOutcome())
	}

	bID := pay("op-B", 30_000, "3").GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: bID})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: bID, Reason: "timeout"})))
	if account().GetHeld() != 30_000 {
		t.Fatal("an unknown outcome ended the hold")
	}
	// Op C would reach 12 000 + 30 000 + 9 000 > 50 000: denied, recorded,
	// and its retries get the denial.
	cRes := pay("op-C", 9_000, "4")
	if cRes.GetExecution().GetState() != pb.State_STATE_DENIED || cRes.GetExecution().GetBudgetOutcome() != "denied" || account().GetHeld() != 30_000 {
		t.Fatalf("over-limit execution: %v", cRes.GetExecution())
	}
	if r := pay("op-C", 9_000, "5"); r.GetRecovery() != pb.Recovery_RECOVERY_RETURN_DENIAL {
		t.Fatalf("retry of a budget denial: %v", r.GetRecovery())
	}
	// Absence is provable only after the dispatch deadline.
	clk.Advance(contractTimeout + ledger.DispatchGrace)
	mustOK(t)(c.Resolve(ctx, connect.NewRequest(&pb.ResolveRequest{ExecutionId: bID, Resolution: pb.Resolution_RESOLUTION_NOT_EXECUTED, Evidence: "status endpoint: no such payment"})))
	if acc := account(); acc.GetHeld() != 0 || acc.GetSpent() != 12_000 {
		t.Fatalf("after not executed: %v", acc)
	}
	// Without an operation key the hold is keyed by the execution id; a
	// refusal by the target releases it.
	d := pay("", 500, "6").GetExecution()
	if d.GetBudgetOperationKey() != d.GetExecutionId() || account().GetHeld() != 500 {
		t.Fatalf("fingerprint-matched hold: %v", d)
	}
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: d.GetExecutionId()})))
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: d.GetExecutionId(), TargetStatus: 402})))
	if acc := account(); acc.GetHeld() != 0 || acc.GetSpent() != 12_000 {
		t.Fatalf("after a refusal: %v", acc)
	}
	// A bad binding (amount missing) is refused before anything is appended.
	_, err = c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "acme"}), "op-Z", "7"))
	wantCode(t, err, connect.CodeInvalidArgument, "amount")

	// Op B's key after NOT_EXECUTED resumes the same execution, and its
	// dispatch holds the amount again.
	if r := pay("op-B", 30_000, "8"); r.GetRecovery() != pb.Recovery_RECOVERY_RESUME || r.GetExecution().GetExecutionId() != bID {
		t.Fatalf("op B after not executed: %v", r)
	}
	resumed, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: bID}))
	if err != nil {
		t.Fatal(err)
	}
	if acc := account(); acc.GetHeld() != 30_000 || resumed.Msg.GetExecution().GetBudgetOutcome() != "held" || resumed.Msg.GetExecution().GetBudgetOperationKey() != "op-B#dispatch-2" {
		t.Fatalf("resumed op B: %v, outcome %q", acc, resumed.Msg.GetExecution().GetBudgetOutcome())
	}
}

// stuckBudget never answers: the gateway "crashes" between appending a
// budget-bound execution and taking its hold.
type stuckBudget struct{}

func (stuckBudget) Hold(ctx context.Context, _ ledger.BudgetHold) (bool, string, error) {
	<-ctx.Done()
	return false, "", ctx.Err()
}
func (stuckBudget) Settle(context.Context, ledger.BudgetHold, string, string) error { return nil }
func (stuckBudget) Release(context.Context, ledger.BudgetHold, string, string) error {
	return nil
}

// A half-done decision (execution appended, hold not taken) is found and
// repaired before anything is dispatched: MarkDispatched takes the same,
// idempotent hold, and a retry of Begin never takes a second one.
func TestHalfDoneBudgetDecisionIsRepairedAtDispatch(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c, b := client(g), budgetClient(g)
	mustOK(t)(b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	crashing := ledger.NewService(ledger.Config{Log: g.ExecutionsLog, Views: g.Views, Key: g.Key, Contracts: g.Contracts,
		GatewayID: g.ID, SignKey: g.SignKey, Budget: stuckBudget{}}) // the same gateway, before its crash
	a := fingerprint.Action{Actor: "agent-7", Tool: "pay_invoice", Arguments: []byte(`{"account":"acme","amount":7000}`), IntentScope: "run:1"}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := crashing.Begin(cctx, ledger.BeginInput{Action: a, OperationKey: "op-half"})
	cancel()
	if err == nil {
		t.Fatal("the stuck gateway's Begin should have failed")
	}
	acc, err := b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acme"}))
	if err != nil || acc.Msg.GetAccount().GetHeld() != 0 {
		t.Fatalf("hold taken by a crashed decision: %v %v", acc, err)
	}
	// The retry (through a healthy gateway) attaches: the execution exists.
	res, err := c.Begin(ctx, connect.NewRequest(&pb.BeginRequest{OperationKey: "op-half", Action: &pb.Action{
		Actor: "agent-7", Tool: "pay_invoice", IntentScope: "run:1", Arguments: args(t, map[string]any{"account": "acme", "amount": 7000})}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || res.Msg.GetExecution().GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("retry: %v", res.Msg)
	}
	d, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: res.Msg.GetExecution().GetExecutionId()}))
	if err != nil {
		t.Fatal(err)
	}
	acc, err = b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acme"}))
	if err != nil || acc.Msg.GetAccount().GetHeld() != 7000 || d.Msg.GetExecution().GetBudgetOutcome() != "held" {
		t.Fatalf("hold not repaired at dispatch: %v %v", acc.Msg, err)
	}
}
