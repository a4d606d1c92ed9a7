package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
)

// deadlineConfig has one tool with a short timeout, so its dispatch
// deadline (300ms + ledger.DispatchGrace) passes quickly.
const deadlineConfig = `
tools:
  charge_card:
    retry: idempotency_key
    match_window: 10m
    timeout: 300ms
`

// The acceptance test of a dead gateway: two `portcullis serve` processes
// on one ledger; the one that wins MarkDispatched is SIGKILLed right
// after. A surviving gateway's deadline sweep records OUTCOME_UNKNOWN once after
// the deadline, and a Begin retry then gets the class recovery
// (RESEND_SAME_KEY for idempotency_key), not WAIT.
func TestDeadGatewayDispatchExpiresOnce(t *testing.T) {
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(deadlineConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	natsAddr := freeAddr(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	dirA := t.TempDir()
	serveProcess(t, dirA, addrA, cfg, "--nats-listen", natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-a")
	procB := serveProcess(t, t.TempDir(), addrB, cfg, "--nats-url", "nats://"+natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-b")
	// A third gateway on the same ledger sweeps too: the expiry races
	// across two living gateways and must land once.
	startGateway(t, "nats://"+natsAddr, nil)
	a := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addrA)
	b := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addrB)

	begin := func(c portcullisv1connect.ExecutionServiceClient, rpc string) *pb.BeginResponse {
		t.Helper()
		res, err := c.Begin(ctx, beginReq("charge_card", args(t, map[string]any{"amount": 500}), "op-charge", rpc))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	first := begin(b, "1")
	id := first.GetExecution().GetExecutionId()
	won, err := b.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: "tok-b"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: "tok-a"}))
	wantCode(t, err, connect.CodeFailedPrecondition, "STATE_DISPATCHED")
	// The winner asking again, through the other gateway, learns it won.
	same, err := a.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: "tok-b"}))
	if err != nil {
		t.Fatal(err)
	}
	if same.Msg.GetExecution().GetStreamSeq() != won.Msg.GetExecution().GetStreamSeq() {
		t.Fatalf("same token through another gateway: %v", same.Msg.GetExecution())
	}
	if err := procB.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = procB.Process.Wait()
	deadline := won.Msg.GetExecution().GetDispatchDeadline().AsTime()

	// A retry before the deadline (when the machine is quick enough to get
	// one in) is told the first call is in flight until then.
	if r := begin(a, "2"); r.GetRecovery() == pb.Recovery_RECOVERY_WAIT {
		if !strings.Contains(r.GetReason(), "in flight until "+deadline.UTC().Format(time.RFC3339Nano)) {
			t.Fatalf("WAIT without the deadline: %q", r.GetReason())
		}
	} else if r.GetRecovery() != pb.Recovery_RECOVERY_RESEND_SAME_KEY {
		t.Fatalf("retry: %v", r)
	}

	// The survivor's sweep records OUTCOME_UNKNOWN (bounded wait).
	var x *pb.Execution
	for stop := time.Now().Add(60 * time.Second); ; {
		res, err := a.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if x = res.Msg.GetExecution(); x.GetState() == pb.State_STATE_OUTCOME_UNKNOWN {
			break
		}
		if time.Now().After(stop) {
			t.Fatalf("execution still %v 60s after its gateway died", x.GetState())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !x.GetUpdatedAt().AsTime().After(deadline) && !x.GetUpdatedAt().AsTime().Equal(deadline) {
		t.Fatalf("OUTCOME_UNKNOWN at %v, before the deadline %v", x.GetUpdatedAt().AsTime(), deadline)
	}
	r := begin(a, "3")
	if r.GetDecision() != pb.Decision_DECISION_ATTACHED || r.GetExecution().GetExecutionId() != id || r.GetRecovery() != pb.Recovery_RECOVERY_RESEND_SAME_KEY {
		t.Fatalf("retry after the deadline: %v", r)
	}

	// Exactly one OUTCOME_UNKNOWN on the subject, with its evidence.
	nc := natsConnectDir(t, "nats://"+natsAddr, dirA, natsauth.Analyst)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range subjectEvents(t, stream, "pc.exec.*."+id) {
		if ev.GetType() != pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN {
			continue
		}
		n++
		if ev.GetExecutionChanged().GetEvidence() != ledger.EvidenceDeadlinePassed || (ev.GetGatewayId() != "gw-a" && ev.GetGatewayId() != "gw-joined") {
			t.Fatalf("OUTCOME_UNKNOWN by %s with evidence %q", ev.GetGatewayId(), ev.GetExecutionChanged().GetEvidence())
		}
	}
	if n != 1 {
		t.Fatalf("%d OUTCOME_UNKNOWN events, want exactly 1", n)
	}
}
