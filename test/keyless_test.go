package test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// A retry without the operation key (a client that lost its _meta) still
// finds the latest execution with its fingerprint when that one was begun
// with a key: "the latest execution for the fingerprint" counts keyed
// executions too, read from the views on another gateway. A keyless
// execution newer than the keyed one, or a keyed one no longer attachable,
// leaves the keyless rule as it was.
func TestKeylessRetryFindsKeyedExecution(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g1 := startGateway(t, "", clk)
	g2 := startGateway(t, g1.NatsURL, clk)
	c1, c2 := client(g1), client(g2)
	a := args(t, map[string]any{"amount": 12000, "currency": "GBP"})
	begin := func(c interface {
		Begin(context.Context, *connect.Request[pb.BeginRequest]) (*connect.Response[pb.BeginResponse], error)
	}, key, id string) *pb.BeginResponse {
		t.Helper()
		res, err := c.Begin(ctx, beginReq("create_payment", a, key, id))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}

	first := begin(c1, "op-A", "1").GetExecution()
	keyed := first.GetExecutionId()
	// On the same gateway (its own write) and on another, once its views
	// hold the keyed execution (a retry comes later than a projection: the
	// views are hints, docs/matching.md).
	if err := g2.Views.WaitFor(ctx, first.GetStreamSeq()); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*struct {
		name string
		c    interface {
			Begin(context.Context, *connect.Request[pb.BeginRequest]) (*connect.Response[pb.BeginResponse], error)
		}
	}{{"same gateway", c1}, {"other gateway", c2}} {
		r := begin(c.c, "", "k"+string(rune('2'+i)))
		if r.GetDecision() != pb.Decision_DECISION_ATTACHED || r.GetExecution().GetExecutionId() != keyed || r.GetRecovery() != pb.Recovery_RECOVERY_RESUME {
			t.Fatalf("%s: keyless retry of a keyed execution: %v %v %s", c.name, r.GetDecision(), r.GetRecovery(), r.GetExecution().GetExecutionId())
		}
	}
	// Its stored result is returned; nothing starts twice.
	mustOK(t)(c1.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: keyed})))
	mustOK(t)(c1.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: keyed, TargetStatus: 201})))
	if r := begin(c2, "", "4"); r.GetExecution().GetExecutionId() != keyed || r.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT {
		t.Fatalf("keyless retry after the result: %v %s", r.GetRecovery(), r.GetExecution().GetExecutionId())
	}
	// Delivered: no longer attachable without a key; a new execution.
	mustOK(t)(c1.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: keyed})))
	fresh := begin(c2, "", "5")
	if fresh.GetDecision() != pb.Decision_DECISION_NEW || fresh.GetExecution().GetExecutionId() == keyed {
		t.Fatalf("keyless after delivery: %v", fresh.GetDecision())
	}
	// A newer keyed execution (another key) does not hide the keyless one
	// that is newer still; the key itself still decides for keyed calls.
	if r := begin(c1, "", "6"); r.GetExecution().GetExecutionId() != fresh.GetExecution().GetExecutionId() {
		t.Fatalf("keyless retry went to %s, want the keyless execution %s", r.GetExecution().GetExecutionId(), fresh.GetExecution().GetExecutionId())
	}
	secondX := begin(c1, "op-B", "7").GetExecution()
	second := secondX.GetExecutionId()
	if second == keyed || second == fresh.GetExecution().GetExecutionId() {
		t.Fatal("a new key did not start a new execution")
	}
	if err := g2.Views.WaitFor(ctx, secondX.GetStreamSeq()); err != nil {
		t.Fatal(err)
	}
	if r := begin(c2, "", "8"); r.GetExecution().GetExecutionId() != second {
		t.Fatalf("keyless retry went to %s, want the newest (keyed) execution %s", r.GetExecution().GetExecutionId(), second)
	}
}
