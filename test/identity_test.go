package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
)

// accepted counts the executions the stream holds for tool (its ACCEPTED
// events), so "no second execution" is read from the ledger itself.
func accepted(t *testing.T, c portcullisv1connect.ExecutionServiceClient, tool string) int {
	t.Helper()
	// ListExecutions reads the views, which may lag the appends just made:
	// the count once it has held for three reads 50 ms apart (at most 5 s).
	n, same := -1, 0
	for deadline := time.Now().Add(5 * time.Second); same < 3 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := c.ListExecutions(context.Background(), connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1000, Tool: tool}))
		if err != nil {
			t.Fatal(err)
		}
		if m := len(res.Msg.GetExecutions()); m == n && m > 0 {
			same++
		} else {
			n, same = m, 1
		}
	}
	return n
}

func dispatch(t *testing.T, c portcullisv1connect.ExecutionServiceClient, id, token string) *pb.Execution {
	t.Helper()
	res, err := c.MarkDispatched(context.Background(), connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: token}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetExecution()
}

// The same operation key after MarkDelivered returns the stored result and
// starts no second execution; a new key with identical content does.
func TestOperationKeyAfterDeliveredReturnsResult(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	a := args(t, map[string]any{"amount": 12000, "currency": "GBP"})
	first, err := c.Begin(ctx, beginReq("create_payment", a, "op-A", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Msg.GetExecution().GetExecutionId()
	dispatch(t, c, id, "")
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201, ResultBody: `{"payment":"p-1"}`})))
	mustOK(t)(c.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: id})))

	// Long past the 10m match window: the key still decides.
	clk.Advance(30 * time.Hour)
	again, err := c.Begin(ctx, beginReq("create_payment", a, "op-A", "2"))
	if err != nil {
		t.Fatal(err)
	}
	m := again.Msg
	if m.GetDecision() != pb.Decision_DECISION_ATTACHED || m.GetExecution().GetExecutionId() != id ||
		m.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT || m.GetExecution().GetResultBody() != `{"payment":"p-1"}` ||
		m.GetExecution().GetTargetStatus() != 201 || m.GetExecution().GetState() != pb.State_STATE_DELIVERED {
		t.Fatalf("same key after delivery: %v", m)
	}
	if n := accepted(t, c, "create_payment"); n != 1 {
		t.Fatalf("%d executions for one operation key, want 1", n)
	}
	// A reused key with a different request is still refused.
	_, err = c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"amount": 1, "currency": "GBP"}), "op-A", "3"))
	wantCode(t, err, connect.CodeAlreadyExists, "op-A")
	// A new key with identical content is a new operation.
	other, err := c.Begin(ctx, beginReq("create_payment", a, "op-B", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if other.Msg.GetDecision() != pb.Decision_DECISION_NEW || other.Msg.GetExecution().GetExecutionId() == id {
		t.Fatalf("new key: %v", other.Msg)
	}
	// Without a key, the fingerprint path still starts anew after delivery.
	d := args(t, map[string]any{"release_id": "r9"})
	d1, err := c.Begin(ctx, beginReq("deploy_release", d, "", "5"))
	if err != nil {
		t.Fatal(err)
	}
	did := d1.Msg.GetExecution().GetExecutionId()
	dispatch(t, c, did, "")
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: did, TargetStatus: 201})))
	mustOK(t)(c.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: did})))
	d2, err := c.Begin(ctx, beginReq("deploy_release", d, "", "6"))
	if err != nil {
		t.Fatal(err)
	}
	if d2.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("fingerprint retry after delivery: %v", d2.Msg)
	}
}

// The same operation key after a denial returns the denial; no new
// approval is opened.
func TestOperationKeyAfterDenialReturnsDenial(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	rot := args(t, map[string]any{"credential": "db-prod"})
	x1, err := c.Begin(ctx, beginReq("rotate_credentials", rot, "op-rot", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := x1.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.Deny(ctx, connect.NewRequest(&pb.DenyRequest{ExecutionId: id, Reason: "not during the freeze"})))
	x2, err := c.Begin(ctx, beginReq("rotate_credentials", rot, "op-rot", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if x2.Msg.GetExecution().GetExecutionId() != id || x2.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_DENIAL ||
		x2.Msg.GetExecution().GetReason() != "not during the freeze" {
		t.Fatalf("same key after denial: %v", x2.Msg)
	}
	if n := accepted(t, c, "rotate_credentials"); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// NOT_EXECUTED (absence proven, after the dispatch deadline) resumes the
// same execution under the same key: same id, so the same Idempotency-Key.
func TestOperationKeyAfterNotExecutedResumes(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	a := args(t, map[string]any{"release_id": "r1"})
	x1, err := c.Begin(ctx, beginReq("deploy_release", a, "op-dep", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := x1.Msg.GetExecution().GetExecutionId()
	dispatch(t, c, id, "")
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: "timeout"})))
	notExec := connect.NewRequest(&pb.ResolveRequest{ExecutionId: id, Resolution: pb.Resolution_RESOLUTION_NOT_EXECUTED, Evidence: "status 404"})
	// Before the deadline a "not found" proves nothing.
	_, err = c.Resolve(ctx, notExec)
	wantCode(t, err, connect.CodeFailedPrecondition, "deadline", id)
	clk.Advance(contractTimeout + ledger.DispatchGrace)
	mustOK(t)(c.Resolve(ctx, notExec))

	x2, err := c.Begin(ctx, beginReq("deploy_release", a, "op-dep", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if x2.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || x2.Msg.GetExecution().GetExecutionId() != id ||
		x2.Msg.GetRecovery() != pb.Recovery_RECOVERY_RESUME {
		t.Fatalf("same key after NOT_EXECUTED: %v", x2.Msg)
	}
	x := dispatch(t, c, id, "resume-1")
	if x.GetState() != pb.State_STATE_DISPATCHED || x.GetDispatchCount() != 2 {
		t.Fatalf("resume: %v dispatch_count %d", x.GetState(), x.GetDispatchCount())
	}
	if n := accepted(t, c, "deploy_release"); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// contractTimeout is the dispatch timeout of the test config's tools that
// name none.
const contractTimeout = 30 * time.Second

// key_retention bounds operation-key matching, not the match window.
func TestKeyRetention(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	a := args(t, map[string]any{"order": "o-1"})
	x1, err := c.Begin(ctx, beginReq("refund_order", a, "op-r", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := x1.Msg.GetExecution().GetExecutionId()
	clk.Advance(47 * time.Hour) // far past match_window 10m, inside key_retention 48h
	x2, err := c.Begin(ctx, beginReq("refund_order", a, "op-r", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if x2.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || x2.Msg.GetExecution().GetExecutionId() != id {
		t.Fatalf("inside key_retention: %v", x2.Msg)
	}
	clk.Advance(2 * time.Hour) // past 48h
	x3, err := c.Begin(ctx, beginReq("refund_order", a, "op-r", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if x3.Msg.GetDecision() != pb.Decision_DECISION_NEW || x3.Msg.GetExecution().GetExecutionId() == id {
		t.Fatalf("past key_retention: %v", x3.Msg)
	}
}

// MarkDispatched with the winner's token answers as the winner was
// answered; another token loses. DISPATCHED records the deadline.
func TestDispatchToken(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	s := ledgerStream(t, g)
	x1, err := c.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "r2"}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := x1.Msg.GetExecution().GetExecutionId()
	won := dispatch(t, c, id, "tok-1")
	if won.GetDispatchToken() != "tok-1" {
		t.Fatalf("dispatch token %q not recorded", won.GetDispatchToken())
	}
	if want := won.GetDispatchedAt().AsTime().Add(contractTimeout + ledger.DispatchGrace); !won.GetDispatchDeadline().AsTime().Equal(want) {
		t.Fatalf("dispatch deadline %v, want dispatched_at + 30s + grace = %v", won.GetDispatchDeadline().AsTime(), want)
	}
	before := streamCount(t, s)
	again := dispatch(t, c, id, "tok-1")
	if again.GetExecutionId() != id || again.GetDispatchCount() != 1 || again.GetStreamSeq() != won.GetStreamSeq() {
		t.Fatalf("same token: %v", again)
	}
	if streamCount(t, s) != before {
		t.Fatal("a same-token retry appended an event")
	}
	_, err = c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: "tok-2"}))
	wantCode(t, err, connect.CodeFailedPrecondition, "STATE_DISPATCHED")
	_, err = c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id}))
	wantCode(t, err, connect.CodeFailedPrecondition, "STATE_DISPATCHED")
}

// A Begin before the dispatch deadline is told the first call is in flight
// until then; after it, OUTCOME_UNKNOWN is recorded once and the class
// recovery is returned, never WAIT.
func TestDispatchDeadlineOnBegin(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	s := ledgerStream(t, g)
	cases := []struct {
		tool string
		want pb.Recovery
	}{
		{"refund_order", pb.Recovery_RECOVERY_RESEND_SAME_KEY},
		{"deploy_release", pb.Recovery_RECOVERY_QUERY_STATUS},
	}
	ids := make([]string, len(cases))
	for i, tc := range cases {
		x, err := c.Begin(ctx, beginReq(tc.tool, args(t, map[string]any{"release_id": "r3"}), "", "1"))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = x.Msg.GetExecution().GetExecutionId()
		d := dispatch(t, c, ids[i], "").GetDispatchDeadline().AsTime()
		w, err := c.Begin(ctx, beginReq(tc.tool, args(t, map[string]any{"release_id": "r3"}), "", "2"))
		if err != nil {
			t.Fatal(err)
		}
		if w.Msg.GetRecovery() != pb.Recovery_RECOVERY_WAIT || !strings.Contains(w.Msg.GetReason(), "in flight until "+d.UTC().Format(time.RFC3339Nano)) {
			t.Fatalf("%s before the deadline: %v %q", tc.tool, w.Msg.GetRecovery(), w.Msg.GetReason())
		}
	}
	clk.Advance(contractTimeout + ledger.DispatchGrace)
	for i, tc := range cases {
		for _, rpc := range []string{"3", "4"} {
			r, err := c.Begin(ctx, beginReq(tc.tool, args(t, map[string]any{"release_id": "r3"}), "", rpc))
			if err != nil {
				t.Fatal(err)
			}
			if r.Msg.GetExecution().GetExecutionId() != ids[i] || r.Msg.GetRecovery() != tc.want ||
				r.Msg.GetExecution().GetState() != pb.State_STATE_OUTCOME_UNKNOWN {
				t.Fatalf("%s after the deadline: %v", tc.tool, r.Msg)
			}
		}
		if n := countEvents(t, s, ids[i], pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN); n != 1 {
			t.Fatalf("%s: %d OUTCOME_UNKNOWN events, want 1", tc.tool, n)
		}
	}
}

// SweepOverdue finds overdue dispatches through the views; a second sweep
// (or another gateway's) finds nothing left to do.
func TestSweepOverdue(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	g := startGateway(t, "", clk)
	c := client(g)
	s := ledgerStream(t, g)
	var ids []string
	for i := range 3 {
		x, err := c.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "sweep", "n": i}), "", "1"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.Msg.GetExecution().GetExecutionId())
		dispatch(t, c, ids[i], "")
	}
	// One of them answered in time: it must not be expired.
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: ids[2], TargetStatus: 200})))
	clk.Advance(contractTimeout + ledger.DispatchGrace)
	seq, err := g.ExecutionsLog.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Views.WaitFor(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ledger.SweepOverdue(ctx); err != nil { // the background sweep may have taken some
		t.Fatal(err)
	}
	for i, id := range ids {
		want, wantN := pb.State_STATE_OUTCOME_UNKNOWN, 1
		if i == 2 {
			want, wantN = pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, 0
		}
		x, err := g.Ledger.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.GetState() != want {
			t.Fatalf("%s is %v after the sweep, want %v", id, x.GetState(), want)
		}
		if n := countEvents(t, s, id, pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN); n != wantN {
			t.Fatalf("%s: %d OUTCOME_UNKNOWN events, want %d", id, n, wantN)
		}
	}
	n, err := g.Ledger.SweepOverdue(ctx)
	if err != nil || n != 0 {
		t.Fatalf("second sweep expired %d (%v), want 0", n, err)
	}
}

// countEvents counts events of type typ on one execution's subject.
func countEvents(t testing.TB, s jetstream.Stream, id string, typ pb.EventType) int {
	t.Helper()
	n := 0
	for _, ev := range subjectEvents(t, s, "pc.exec.*."+id) {
		if ev.GetType() == typ {
			n++
		}
	}
	return n
}
