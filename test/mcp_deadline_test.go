package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
)

// keyTarget honours Idempotency-Key and counts what it saw per key. The
// first request blocks until release is closed (its gateway is killed in
// between).
type keyTarget struct {
	*httptest.Server
	arrived chan string   // the first request's key
	release chan struct{} // closed: the blocked first request may return
	mu      sync.Mutex
	seen    map[string]int
	done    map[string]string
	perform int
}

func newKeyTarget(t *testing.T) *keyTarget {
	tg := &keyTarget{arrived: make(chan string, 1), release: make(chan struct{}), seen: map[string]int{}, done: map[string]string{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		tg.mu.Lock()
		tg.seen[key]++
		ans, again := tg.done[key]
		if !again {
			tg.perform++
			ans = fmt.Sprintf(`{"charge":"ch-%d"}`, tg.perform)
			tg.done[key] = ans
		}
		first := tg.perform == 1 && !again
		tg.mu.Unlock()
		if first {
			tg.arrived <- key
			<-tg.release
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, ans)
	}))
	t.Cleanup(func() {
		select {
		case <-tg.release:
		default:
			close(tg.release)
		}
		tg.Close()
	})
	return tg
}

func (tg *keyTarget) counts(key string) (seen, performed int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.seen[key], tg.perform
}

// Acceptance (issue 8, a dead gateway) through /mcp: an MCP tools/call
// whose gateway (a `portcullis serve` process) is SIGKILLed right after it
// won DISPATCHED and sent. The other gateway records OUTCOME_UNKNOWN once,
// after the dispatch deadline; the agent's retry through the other gateway
// (same operation key) gets the idempotency_key recovery: resent with the
// same Idempotency-Key, which the target sees twice and performs once, and
// the agent gets the result. "after the deadline": the retry comes once
// the sweep expired the execution. "waits through the deadline": the retry
// comes while the execution is still in flight, waits, and when the
// deadline passes (the sweep or the wait expires it) gets the same
// recovery in the same call, not "retry later".
func TestMCPDeadGatewayDispatchResolvesByClass(t *testing.T) {
	t.Run("after the deadline", func(t *testing.T) { deadGatewayRetry(t, false) })
	t.Run("waits through the deadline", func(t *testing.T) { deadGatewayRetry(t, true) })
}

func deadGatewayRetry(t *testing.T, early bool) {
	ctx := context.Background()
	tg := newKeyTarget(t)
	sum := sha256.Sum256([]byte(agentToken))
	cfg := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
agents:
  agent-7: {token_sha256: %s}
tools:
  charge_card:
    channel: http
    target: %s/charges
    timeout: 1s   # dispatch deadline 1s + ledger.DispatchGrace
    retry: idempotency_key
    match_window: 10m
`, hex.EncodeToString(sum[:]), tg.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	natsAddr := freeAddr(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	dirA := t.TempDir()
	serveProcess(t, dirA, addrA, cfg, "--nats-listen", natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-a")
	procB := serveProcess(t, t.TempDir(), addrB, cfg, "--nats-url", "nats://"+natsAddr, "--fingerprint-key", testKey, "--gateway-id", "gw-b")
	key := sdk.Meta{"io.portcullis/operation-key": "op-mcp-charge"}
	params := &sdk.CallToolParams{Name: "charge_card", Arguments: map[string]any{"amount": 500}, Meta: key}

	// The first call through B; B dies while the target holds the request.
	sb := agentSession(t, addrB)
	go func() { _, _ = sb.CallTool(ctx, params) }()
	var id string
	select {
	case id = <-tg.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the first call never reached the target")
	}
	if err := procB.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = procB.Process.Wait()
	close(tg.release)

	a := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addrA)
	get := func() *pb.Execution {
		t.Helper()
		res, err := a.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetExecution()
	}
	x := get()
	if x.GetState() != pb.State_STATE_DISPATCHED || x.GetDispatchDeadline() == nil || x.GetDispatchToken() == "" {
		t.Fatalf("the dead gateway's execution: %v", x)
	}
	deadline := x.GetDispatchDeadline().AsTime()
	for stop := time.Now().Add(60 * time.Second); !early && x.GetState() != pb.State_STATE_OUTCOME_UNKNOWN; x = get() {
		if time.Now().After(stop) {
			t.Fatalf("execution still %v 60s after its gateway died", x.GetState())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The agent's retry through A: resent with the same key, one effect.
	r, err := agentSession(t, addrA).CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	rec := structured(t, r)
	if rec["state"] != "completed" || rec["execution_id"] != id {
		t.Fatalf("retry after the deadline: %v", rec)
	}
	if seen, performed := tg.counts(id); seen != 2 || performed != 1 {
		t.Fatalf("target saw key %s %d times and performed %d, want 2 and 1", id, seen, performed)
	}

	// Exactly one OUTCOME_UNKNOWN on the subject, by the survivor, with
	// the deadline's evidence.
	nc := natsConnectDir(t, "nats://"+natsAddr, dirA, natsauth.Analyst)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		t.Fatal(err)
	}
	// The dead gateway's dispatch was one durable append: the execution
	// starts with ACCEPTED_DISPATCHED (accepted and dispatched in one
	// event), carrying the token and deadline the sweep expired it by.
	evs := subjectEvents(t, stream, "pc.exec.*."+id)
	if first := evs[0]; first.GetType() != pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED || first.GetGatewayId() != "gw-b" ||
		!first.GetExecutionChanged().GetExecution().GetDispatchDeadline().AsTime().Equal(deadline) {
		t.Fatalf("first event %s by %s, want ACCEPTED_DISPATCHED by gw-b with deadline %v", first.GetType(), first.GetGatewayId(), deadline)
	}
	// Nothing but the early retry's attach between the combined append
	// and the expiry.
	next := evs[1]
	if early && next.GetType() == pb.EventType_EVENT_TYPE_ATTACHED {
		next = evs[2]
	}
	if next.GetType() != pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN {
		t.Fatalf("event after the dispatch %s, want OUTCOME_UNKNOWN", next.GetType())
	}
	n := 0
	for _, ev := range evs {
		if ev.GetType() != pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN {
			continue
		}
		n++
		if ev.GetExecutionChanged().GetEvidence() != ledger.EvidenceDeadlinePassed || ev.GetGatewayId() != "gw-a" {
			t.Fatalf("OUTCOME_UNKNOWN by %s with evidence %q", ev.GetGatewayId(), ev.GetExecutionChanged().GetEvidence())
		}
		if ev.GetExecutionChanged().GetExecution().GetUpdatedAt().AsTime().Before(deadline) {
			t.Fatalf("OUTCOME_UNKNOWN at %v, before the deadline %v", ev.GetExecutionChanged().GetExecution().GetUpdatedAt().AsTime(), deadline)
		}
	}
	if n != 1 {
		t.Fatalf("%d OUTCOME_UNKNOWN events, want exactly 1", n)
	}
}
