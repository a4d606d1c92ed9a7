package test

import (
	"context"
	"io"
	"net/http"
	"strings"
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
func (stuckBudget) Settle(context.Context, ledger.BudgetHold, ledger.BudgetEvidence) error {
	return nil
}
func (stuckBudget) Release(context.Context, ledger.BudgetHold, ledger.BudgetEvidence) error {
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

// What a budget-bound execution's result proves moves its hold, with the
// status recorded as a number: a 2xx settles, a 4xx releases, a 5xx proves
// neither and keeps the hold. An http result needs a status; a resolution
// needs evidence, and "completed" without a status settles. Decisions show
// within_limit and allowed in plain JSON, false included.
func TestBudgetEvidenceFromResults(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c, b := client(g), budgetClient(g)
	mustOK(t)(b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	held := func() int64 {
		t.Helper()
		a, err := b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acme"}))
		if err != nil {
			t.Fatal(err)
		}
		return a.Msg.GetAccount().GetHeld()
	}
	dispatched := func(op string, amount int) string {
		t.Helper()
		res, err := c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "acme", "amount": amount, "invoice": op}), op, op))
		if err != nil {
			t.Fatal(err)
		}
		id := res.Msg.GetExecution().GetExecutionId()
		mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
		return id
	}
	record := func(id string, status int32) (*connect.Response[pb.RecordResultResponse], error) {
		return c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: status}))
	}

	bad := dispatched("op-502", 1_000)
	_, err := record(bad, 0)
	wantCode(t, err, connect.CodeInvalidArgument, "HTTP status")
	res, err := record(bad, 502)
	if err != nil {
		t.Fatal(err)
	}
	if x := res.Msg.GetExecution(); x.GetBudgetOutcome() != "held" || held() != 1_000 {
		t.Fatalf("a 502 moved the hold: outcome %q, held %d", x.GetBudgetOutcome(), held())
	}
	ok := dispatched("op-201", 2_000)
	mustOK(t)(record(ok, 201))
	refused := dispatched("op-404", 3_000)
	mustOK(t)(record(refused, 404))
	if held() != 1_000 {
		t.Fatalf("held %d after a 201 and a 404, want the 502's 1000", held())
	}
	list, err := b.ListDecisions(ctx, connect.NewRequest(&pb.ListDecisionsRequest{Account: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	closed := map[string]*pb.BudgetDecision{}
	for _, d := range list.Msg.GetDecisions() {
		if d.GetOutcome() == "settled" || d.GetOutcome() == "released" {
			closed[d.GetOperationKey()] = d
		}
		if d.GetOutcome() == "reserved" && (d.WithinLimit == nil || d.Allowed == nil) {
			t.Errorf("reservation %s without within_limit/allowed set", d.GetOperationKey())
		}
	}
	if d := closed["op-201"]; d.GetOutcome() != "settled" || d.GetEvidence().GetTargetStatus() != 201 || d.GetEvidence().GetExecutionId() != ok ||
		d.GetHeldSeen() != 3_000 || len(d.GetHeldListSeen()) != 2 {
		t.Fatalf("settlement on a 201: %v", d)
	}
	if d := closed["op-404"]; d.GetOutcome() != "released" || d.GetEvidence().GetTargetStatus() != 404 || d.GetEvidence().GetNote() == "" {
		t.Fatalf("release on a 404: %v", d)
	}
	if _, ok := closed["op-502"]; ok {
		t.Fatal("the 502's hold was closed")
	}

	// Resolutions: evidence required; "completed" without a status spends.
	unknown := dispatched("op-unknown", 4_000)
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: unknown, Reason: "timeout"})))
	_, err = c.Resolve(ctx, connect.NewRequest(&pb.ResolveRequest{ExecutionId: unknown, Resolution: pb.Resolution_RESOLUTION_COMPLETED}))
	wantCode(t, err, connect.CodeInvalidArgument, "evidence is required")
	r, err := c.Resolve(ctx, connect.NewRequest(&pb.ResolveRequest{ExecutionId: unknown, Resolution: pb.Resolution_RESOLUTION_COMPLETED,
		Evidence: "the bank statement shows the payment"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Msg.GetExecution().GetBudgetOutcome() != "spent" || held() != 1_000 {
		t.Fatalf("a completed resolution: outcome %q, held %d", r.Msg.GetExecution().GetBudgetOutcome(), held())
	}

	// Plain JSON over HTTP: a denial says within_limit and allowed false.
	body := `{"account":"acme","operationKey":"op-big","requestDigest":"sha256:big","amount":"60000"}`
	resp, err := http.Post("http://"+g.Addr+"/portcullis.v1.BudgetService/Reserve", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"outcome":"denied"`) ||
		!strings.Contains(string(raw), `"withinLimit":false`) || !strings.Contains(string(raw), `"allowed":false`) {
		t.Fatalf("denial over plain JSON: %d %s", resp.StatusCode, raw)
	}
}

// An executor's answer that comes after the outcome was recorded unknown is
// not lost: RecordResult resolves the execution as completed, with evidence
// naming the late answer, and a budget-bound hold follows the status.
func TestLateResultOverConnectResolves(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", &clock{})
	c, b := client(g), budgetClient(g)
	mustOK(t)(b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	res, err := c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "acme", "amount": 700, "invoice": "late"}), "op-late", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: "timeout"})))
	late, err := c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201, ResultBody: `{"paid":true}`}))
	if err != nil {
		t.Fatalf("a late result was refused: %v", err)
	}
	x := late.Msg.GetExecution()
	if x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED || x.GetTargetStatus() != 201 || x.GetBudgetOutcome() != "spent" {
		t.Fatalf("after the late result: state %v status %d budget %q", x.GetState(), x.GetTargetStatus(), x.GetBudgetOutcome())
	}
	evs := subjectEvents(t, ledgerStream(t, g), "pc.exec.*."+id)
	last := evs[len(evs)-1]
	if last.GetType() != pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED ||
		!strings.Contains(last.GetExecutionChanged().GetEvidence(), "after the outcome was recorded unknown") {
		t.Fatalf("the late result is not recorded as a resolution with its evidence: %v", last)
	}
	// Any other illegal result is still refused.
	_, err = c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 200}))
	wantCode(t, err, connect.CodeFailedPrecondition)
}

// A bad account name taken from the agent's arguments is refused like a
// bad amount: invalid_argument, nothing appended, and a retry is refused
// again (audit s6). Before, it was recorded as a DENIED execution that
// every retry got back, with the reason "budget bad acct!: budget bad
// acct!: …". A denial by the budget names the account once.
func TestBudgetBadAccountRefused(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", &clock{})
	c := client(g)
	s := ledgerStream(t, g)
	before := streamCount(t, s)
	for i, op := range []string{"op-bad-1", "op-bad-1", ""} {
		_, err := c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "bad acct!", "amount": 5, "invoice": "i"}), op, string(rune('1'+i))))
		wantCode(t, err, connect.CodeInvalidArgument, `budget account "bad acct!": account names are 1-64 of A-Z a-z 0-9 _ -`)
	}
	if n := streamCount(t, s); n != before {
		t.Fatalf("a bad account name appended %d events", n-before)
	}
	// An account with no limit is a denial by the budget: recorded, and
	// its reason names the account once.
	res, err := c.Begin(ctx, beginReq("pay_invoice", args(t, map[string]any{"account": "nosuch", "amount": 5, "invoice": "i"}), "op-nosuch", "4"))
	if err != nil {
		t.Fatal(err)
	}
	x := res.Msg.GetExecution()
	if x.GetState() != pb.State_STATE_DENIED || !strings.HasPrefix(x.GetReason(), "budget nosuch: ") || strings.Count(x.GetReason(), "budget nosuch") != 1 ||
		!strings.Contains(x.GetReason(), "unknown account") {
		t.Fatalf("denied by the budget: %v %q", x.GetState(), x.GetReason())
	}
}
