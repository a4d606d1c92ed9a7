package test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// Three scripted incidents, investigated through `portcullis investigate`:
// the five answers come out right.
func TestInvestigateIncidents(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	begin := func(tool, session, req, opKey string, a map[string]any) *pb.Execution {
		t.Helper()
		r := beginReq(tool, args(t, a), opKey, req)
		r.Msg.Correlation.SessionId = session
		res, err := c.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetExecution()
	}
	investigate := func(id string) audit.Investigation {
		t.Helper()
		out, err := exec.Command(binary, "investigate", id, "--nats-url", natsURL, "--data-dir", dataDir, "--json").Output()
		if err != nil {
			t.Fatalf("investigate: %v\n%s", err, out)
		}
		var inv audit.Investigation
		if err := json.Unmarshal(out, &inv); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	want := func(inv audit.Investigation, answers ...string) {
		t.Helper()
		for i, w := range answers {
			if !strings.HasPrefix(inv.Answers[i].Answer, w) {
				t.Fatalf("answer %d: %q, want it to start with %q\n%+v", i+1, inv.Answers[i].Answer, w, inv)
			}
		}
	}

	// (a) A transport retry attached to a completed execution whose delivery failed.
	a := begin("deploy_release", "s-a", "1", "", map[string]any{"release_id": "r-a"})
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: a.GetExecutionId()})))
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: a.GetExecutionId(), TargetStatus: 201})))
	begin("deploy_release", "s-a", "2", "", map[string]any{"release_id": "r-a"})
	want(investigate(a.GetExecutionId()), "one", "yes: it was dispatched", "yes: the target answered 201", "yes:", "reused")

	// (b) Two agent processes, each deliberately performing the same action.
	b1 := begin("create_payment", "s-b1", "1", "order-1", map[string]any{"amount": 100})
	b2 := begin("create_payment", "s-b2", "1", "order-2", map[string]any{"amount": 100})
	for _, x := range []*pb.Execution{b1, b2} {
		mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: x.GetExecutionId()})))
		mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: x.GetExecutionId(), TargetStatus: 201})))
		mustOK(t)(c.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: x.GetExecutionId()})))
	}
	inv := investigate(b1.GetExecutionId())
	want(inv, "2 agent sessions", "yes: it was dispatched", "yes: the target answered 201", "no: the result was delivered", "new attempt")
	if len(inv.Related) != 1 || inv.Related[0] != b2.GetExecutionId() {
		t.Fatalf("related: %v", inv.Related)
	}
	byKey, err := exec.Command(binary, "investigate", "--operation-key", "order-2", "--nats-url", natsURL, "--data-dir", dataDir, "--json").Output()
	if err != nil || !strings.Contains(string(byKey), `"execution_id": "`+b2.GetExecutionId()+`"`) {
		t.Fatalf("investigate --operation-key: %v\n%s", err, byKey)
	}

	// (c) A retry after an unknown outcome, held for review.
	x := begin("rotate_credentials", "s-c", "1", "", map[string]any{"credential": "db-prod"})
	mustOK(t)(c.Authorize(ctx, connect.NewRequest(&pb.AuthorizeRequest{ExecutionId: x.GetExecutionId()})))
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: x.GetExecutionId()})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: x.GetExecutionId(), Reason: "ssh connection dropped"})))
	begin("rotate_credentials", "s-c", "2", "", map[string]any{"credential": "db-prod"})
	inv = investigate(x.GetExecutionId())
	want(inv, "one", "yes: it was dispatched after authorization by local-operator", "no: the outcome is unknown", "not applicable", "reused")
	if !strings.Contains(inv.Answers[4].Answer, "held for review") {
		t.Fatalf("answer 5: %q", inv.Answers[4].Answer)
	}
	if out, err := exec.Command(binary, "investigate", x.GetExecutionId(), "--nats-url", natsURL, "--data-dir", dataDir).Output(); err != nil || !strings.Contains(string(out), "Timeline") {
		t.Fatalf("text output: %v\n%s", err, out)
	}
	// The same structure through AuditService.Investigate.
	ac := portcullisv1connect.NewAuditServiceClient(http.DefaultClient, "http://"+addr)
	res, err := ac.Investigate(ctx, connect.NewRequest(&pb.InvestigateRequest{ExecutionId: x.GetExecutionId()}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.GetAnswers()) != 5 || res.Msg.GetAnswers()[4].GetAnswer() != inv.Answers[4].Answer || len(res.Msg.GetTimeline()) != len(inv.Timeline) {
		t.Fatalf("rpc: %v", res.Msg)
	}
	_, err = ac.Investigate(ctx, connect.NewRequest(&pb.InvestigateRequest{ExecutionId: "act_01J4K8J7DX7V0000000000000Z"}))
	wantCode(t, err, connect.CodeNotFound)
}
