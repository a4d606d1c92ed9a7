package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

func TestBeginTwiceAttachesWithRecovery(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	a := args(t, map[string]any{"release_id": "2026.07.22", "comment": "first try"})
	first, err := c.Begin(ctx, beginReq("deploy_release", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	x := first.Msg.GetExecution()
	if first.Msg.GetDecision() != pb.Decision_DECISION_NEW || x.GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("first Begin: %v %v", first.Msg.GetDecision(), x.GetState())
	}
	if len(x.GetExecutionId()) != 30 || x.GetExecutionId()[:4] != "act_" {
		t.Fatalf("execution id %q", x.GetExecutionId())
	}
	// The retry rewords the comment (ignored) and spells the default region out.
	b := args(t, map[string]any{"release_id": "2026.07.22", "comment": "retry", "region": "us-east-1"})
	second, err := c.Begin(ctx, beginReq("deploy_release", b, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || second.Msg.GetExecution().GetExecutionId() != x.GetExecutionId() {
		t.Fatalf("retry: %v to %s, want ATTACHED to %s", second.Msg.GetDecision(), second.Msg.GetExecution().GetExecutionId(), x.GetExecutionId())
	}
	if second.Msg.GetRecovery() != pb.Recovery_RECOVERY_RESUME || second.Msg.GetReason() == "" {
		t.Fatalf("recovery %v (%q), want RESUME with a reason", second.Msg.GetRecovery(), second.Msg.GetReason())
	}
	// The attach is an event carrying the retry's correlation.
	evs := subjectEvents(t, ledgerStream(t, g), ledger.ExecutionSubject(x.GetIntentToken(), x.GetExecutionId()))
	if len(evs) != 2 || evs[1].GetType() != pb.EventType_EVENT_TYPE_ATTACHED {
		t.Fatalf("events on the execution: %v", evs)
	}
	if got := evs[1].GetExecutionChanged().GetCorrelation().GetJsonrpcId(); got != "2" {
		t.Fatalf("attach event correlation %q, want 2", got)
	}

	// Dispatched: the retry waits.
	if _, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: x.GetExecutionId()})); err != nil {
		t.Fatal(err)
	}
	third, err := c.Begin(ctx, beginReq("deploy_release", a, "", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if third.Msg.GetRecovery() != pb.Recovery_RECOVERY_WAIT || third.Msg.GetExecution().GetDispatchedAt() == nil {
		t.Fatalf("retry of a dispatched execution: %v, dispatched_at %v", third.Msg.GetRecovery(), third.Msg.GetExecution().GetDispatchedAt())
	}
	// Unknown outcome of a status_query tool: query status.
	if _, err := c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: x.GetExecutionId(), Reason: "timeout after body sent"})); err != nil {
		t.Fatal(err)
	}
	fourth, err := c.Begin(ctx, beginReq("deploy_release", a, "", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Msg.GetRecovery() != pb.Recovery_RECOVERY_QUERY_STATUS {
		t.Fatalf("retry after unknown outcome: %v", fourth.Msg.GetRecovery())
	}
}

// Two gateways on one JetStream; 64 concurrent Begins for one new intent
// produce exactly one execution; 64 concurrent MarkDispatched exactly one
// dispatch, and every loser is told the winner's state.
func TestTwoGatewaysRaceOneIntent(t *testing.T) {
	ctx := context.Background()
	g1 := startGateway(t, "", nil)
	g2 := startGateway(t, g1.NatsURL, nil)
	clients := []interface {
		Begin(context.Context, *connect.Request[pb.BeginRequest]) (*connect.Response[pb.BeginResponse], error)
		MarkDispatched(context.Context, *connect.Request[pb.MarkDispatchedRequest]) (*connect.Response[pb.MarkDispatchedResponse], error)
	}{client(g1), client(g2)}
	for round := range 3 {
		a := args(t, map[string]any{"amount": 1200, "round": round})
		var news, attached atomic.Int32
		ids := sync.Map{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := clients[i%2].Begin(ctx, beginReq("create_payment", a, "", fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
					return
				}
				ids.Store(res.Msg.GetExecution().GetExecutionId(), true)
				switch res.Msg.GetDecision() {
				case pb.Decision_DECISION_NEW:
					news.Add(1)
				case pb.Decision_DECISION_ATTACHED:
					attached.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		var id string
		n := 0
		ids.Range(func(k, _ any) bool { id = k.(string); n++; return true })
		if news.Load() != 1 || attached.Load() != 63 || n != 1 {
			t.Fatalf("round %d: %d NEW, %d ATTACHED, %d distinct executions; want 1, 63, 1", round, news.Load(), attached.Load(), n)
		}

		var wins atomic.Int32
		start = make(chan struct{})
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := clients[i%2].MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id}))
				if err == nil {
					wins.Add(1)
					return
				}
				if connect.CodeOf(err) != connect.CodeFailedPrecondition {
					t.Errorf("loser got %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d dispatches won, want exactly 1", round, wins.Load())
		}
		_, err := clients[0].MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id}))
		wantCode(t, err, connect.CodeFailedPrecondition, "STATE_DISPATCHED")
	}
}

func TestOperationKeys(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	s := ledgerStream(t, g)
	a := args(t, map[string]any{"amount": 12000, "currency": "GBP"})
	first, err := c.Begin(ctx, beginReq("create_payment", a, "op-A", "1"))
	if err != nil {
		t.Fatal(err)
	}
	// Same key, same action: attaches (even from another run).
	retry := beginReq("create_payment", a, "op-A", "2")
	retry.Msg.Action.IntentScope = "run:other"
	again, err := c.Begin(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if again.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || again.Msg.GetExecution().GetExecutionId() != first.Msg.GetExecution().GetExecutionId() {
		t.Fatalf("same key retry: %v", again.Msg)
	}
	// Same key, different action: refused, nothing appended.
	before := streamCount(t, s)
	_, err = c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"amount": 99999, "currency": "GBP"}), "op-A", "3"))
	wantCode(t, err, connect.CodeAlreadyExists, "op-A")
	if after := streamCount(t, s); after != before {
		t.Fatalf("refused key reuse appended %d events", after-before)
	}
	// Different key, identical action: a second execution.
	other, err := c.Begin(ctx, beginReq("create_payment", a, "op-B", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if other.Msg.GetDecision() != pb.Decision_DECISION_NEW || other.Msg.GetExecution().GetExecutionId() == first.Msg.GetExecution().GetExecutionId() {
		t.Fatalf("new key: %v", other.Msg)
	}
	if other.Msg.GetExecution().GetFingerprint() != first.Msg.GetExecution().GetFingerprint() {
		t.Fatal("identical actions should share a fingerprint")
	}
}

func TestContractsAndWindows(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	s := ledgerStream(t, g)

	before := streamCount(t, s)
	_, err := c.Begin(ctx, beginReq("drop_database", args(t, nil), "", "1"))
	wantCode(t, err, connect.CodeFailedPrecondition, "drop_database", "contract")
	if streamCount(t, s) != before {
		t.Fatal("a refused tool appended events")
	}

	// read_only: recorded, never matched.
	a := args(t, map[string]any{"release_id": "r1"})
	r1, err := c.Begin(ctx, beginReq("get_release", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Begin(ctx, beginReq("get_release", a, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Msg.GetDecision() != pb.Decision_DECISION_NEW || r1.Msg.GetExecution().GetExecutionId() == r2.Msg.GetExecution().GetExecutionId() {
		t.Fatal("read_only call was matched")
	}

	// A passed match window gives a new execution.
	p := args(t, map[string]any{"amount": 5})
	p1, err := c.Begin(ctx, beginReq("create_payment", p, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Minute)
	p2, err := c.Begin(ctx, beginReq("create_payment", p, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if p2.Msg.GetDecision() != pb.Decision_DECISION_NEW || p2.Msg.GetExecution().GetExecutionId() == p1.Msg.GetExecution().GetExecutionId() {
		t.Fatal("execution outside its 10m window absorbed a retry")
	}

	// until_resolved keeps matching OUTCOME_UNKNOWN, however long.
	rot := args(t, map[string]any{"credential": "db-prod"})
	x1, err := c.Begin(ctx, beginReq("rotate_credentials", rot, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := x1.Msg.GetExecution().GetExecutionId()
	if x1.Msg.GetExecution().GetState() != pb.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("per_use tool starts in %v", x1.Msg.GetExecution().GetState())
	}
	_, err = c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id}))
	wantCode(t, err, connect.CodeFailedPrecondition, "STATE_AWAITING_APPROVAL")
	mustOK(t)(c.Authorize(ctx, connect.NewRequest(&pb.AuthorizeRequest{ExecutionId: id})))
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: "ssh dropped"})))
	clk.Advance(1000 * time.Hour)
	x2, err := c.Begin(ctx, beginReq("rotate_credentials", rot, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if x2.Msg.GetExecution().GetExecutionId() != id || x2.Msg.GetRecovery() != pb.Recovery_RECOVERY_NEEDS_REVIEW {
		t.Fatalf("until_resolved retry: %v %v", x2.Msg.GetDecision(), x2.Msg.GetRecovery())
	}

	// COMPLETED_RESULT_NOT_DELIVERED returns the stored result; after
	// MarkDelivered the same action is a new execution.
	d := args(t, map[string]any{"release_id": "r9"})
	d1, err := c.Begin(ctx, beginReq("deploy_release", d, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	did := d1.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: did})))
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: did, TargetStatus: 201, ResultBody: `{"deploy":"d-1"}`})))
	d2, err := c.Begin(ctx, beginReq("deploy_release", d, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if d2.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT || d2.Msg.GetExecution().GetResultBody() != `{"deploy":"d-1"}` || d2.Msg.GetExecution().GetTargetStatus() != 201 {
		t.Fatalf("retry after result: %v", d2.Msg)
	}
	mustOK(t)(c.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: did})))
	d3, err := c.Begin(ctx, beginReq("deploy_release", d, "", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if d3.Msg.GetDecision() != pb.Decision_DECISION_NEW || d3.Msg.GetExecution().GetExecutionId() == did {
		t.Fatal("delivered execution absorbed a new call")
	}
}

func mustOK(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
