package dispatch_test

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	"github.com/portcullis-dev/portcullis/executor"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// counting is an executor that counts its sends and answers 201.
type counting struct {
	sends atomic.Int32
	delay time.Duration
}

func (c *counting) Send(_ config.Tool, id string, _ []byte) executor.Outcome {
	c.sends.Add(1)
	time.Sleep(c.delay)
	return executor.Outcome{Observed: executor.Answered, Status: 201, Body: `{"ok":"` + id + `"}`, ContentType: "application/json"}
}

func (c *counting) Status(context.Context, config.Tool, string) dispatch.Status {
	return dispatch.Status{Evidence: "no status query"}
}

func startLedger(t *testing.T) *ledger.Service {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  charge:\n    retry: idempotency_key\n    match_window: 10m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: cfg, NatsListen: "127.0.0.1:-1",
		FingerprintKey: hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	return g.Ledger
}

// Many callers racing the same operation through one driver (a real
// embedded JetStream and Pebble underneath): exactly one send, and every
// caller gets the one stored result.
func TestDriverRacingCallersSendOnce(t *testing.T) {
	l := startLedger(t)
	ex := &counting{delay: 50 * time.Millisecond}
	d := dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":5}`)},
		OperationKey: "op-race-1",
	}
	const callers = 8
	answers := make([]dispatch.Answer, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = d.Run(context.Background(), tool, in)
		}()
	}
	wg.Wait()
	if n := ex.sends.Load(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
	for i, a := range answers {
		if a.State != dispatch.StateCompleted || a.Execution.GetExecutionId() != answers[0].Execution.GetExecutionId() ||
			a.Execution.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
			t.Fatalf("caller %d: %+v", i, a)
		}
	}
	// A new operation key is a new operation.
	in.OperationKey = "op-race-2"
	if a := d.Run(context.Background(), tool, in); a.State != dispatch.StateCompleted || ex.sends.Load() != 2 {
		t.Fatalf("new key: %+v, %d sends", a, ex.sends.Load())
	}
}

// The driver never speaks MCP: it imports no MCP SDK.
func TestDriverImportsNoMCP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/portcullis-dev/portcullis/dispatch").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "modelcontextprotocol") {
		t.Fatal("dispatch depends on the MCP SDK")
	}
}

// A retry attached to a call still at the target is told so honestly
// (in_flight, nothing resent) once its wait ends; the target counts one
// send.
func TestDriverAttachedCallInFlight(t *testing.T) {
	l := startLedger(t)
	ex := &counting{delay: 2 * time.Second}
	d := dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Handle("fake", ex)
	d.SetWaitMax(100 * time.Millisecond)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":6}`)},
		OperationKey: "op-slow-1",
	}
	first := make(chan dispatch.Answer, 1)
	go func() { first <- d.Run(context.Background(), tool, in) }()
	for ex.sends.Load() == 0 { // the first call is at the target
		time.Sleep(5 * time.Millisecond)
	}
	a := d.Run(context.Background(), tool, in)
	if a.State != dispatch.StateInFlight || !strings.Contains(a.Why, "in flight") || !strings.Contains(a.Why, "nothing was resent") {
		t.Fatalf("attached call: %+v", a)
	}
	if f := <-first; f.State != dispatch.StateCompleted || ex.sends.Load() != 1 {
		t.Fatalf("first call: %+v, %d sends", f, ex.sends.Load())
	}
}
