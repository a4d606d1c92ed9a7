package dispatch_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

// startLedgerWith starts a gateway (real embedded JetStream and Pebble)
// with the tools of yaml and returns its ledger.
func startLedgerWith(t *testing.T, yaml string) *ledger.Service {
	return startLedgerYAMLClock(t, yaml, nil)
}

// startLedgerYAMLClock is startLedgerWith on a clock the test moves (nil:
// the wall clock).
func startLedgerYAMLClock(t *testing.T, yaml string, clk *clock) *ledger.Service {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: cfg, NatsListen: "127.0.0.1:-1",
		FingerprintKey: hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if clk != nil {
		o.Now = clk.Now
	}
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	return g.Ledger
}

// scripted is an executor whose sends answer from a script (the last
// entry repeats) and which checks, on every send, that the ledger already
// holds the execution DISPATCHED (the send is the first byte).
type scripted struct {
	l      *ledger.Service
	sends  atomic.Int32
	script []executor.Outcome
	status dispatch.Status

	mu     sync.Mutex
	before []string // sends that found the execution not yet DISPATCHED
}

func (s *scripted) Send(_ config.Tool, id string, _ []byte) executor.Outcome {
	n := int(s.sends.Add(1))
	if x, err := s.l.Get(context.Background(), id); err != nil || x.GetState() != pb.State_STATE_DISPATCHED {
		s.mu.Lock()
		s.before = append(s.before, fmt.Sprintf("send %d of %s found %v (%v)", n, id, x.GetState(), err))
		s.mu.Unlock()
	}
	if n > len(s.script) {
		n = len(s.script)
	}
	return s.script[n-1]
}

func (s *scripted) Status(context.Context, config.Tool, string) dispatch.Status { return s.status }

func answered(id string) executor.Outcome {
	return executor.Outcome{Observed: executor.Answered, Status: 201, Body: `{"ok":"` + id + `"}`, ContentType: "application/json"}
}

func (s *scripted) checkOrder(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.before) > 0 {
		t.Fatalf("the executor was called before DISPATCHED landed: %v", s.before)
	}
}

const orderTools = `tools:
  charge:
    retry: idempotency_key
    match_window: 10m
  deploy:
    retry: status_query
    match_window: 1h
`

// The executor is called only once DISPATCHED is in the ledger, for every
// caller of a racing operation and for a resend.
func TestDriverSendsOnlyAfterDispatched(t *testing.T) {
	l := startLedgerWith(t, orderTools)
	ex := &scripted{l: l, script: []executor.Outcome{answered("x")}}
	d := dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := ledger.BeginInput{
				Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":7}`)},
				OperationKey: fmt.Sprintf("op-order-%d", i%2),
			}
			if a := d.Run(context.Background(), tool, in); a.State != dispatch.StateCompleted {
				t.Errorf("caller %d: %+v", i, a)
			}
		}()
	}
	wg.Wait()
	if n := ex.sends.Load(); n != 2 {
		t.Fatalf("%d sends, want 2 (one per operation key)", n)
	}
	ex.checkOrder(t)
}

// NOT_SENT (the executor proved nothing left) answers not_sent; the retry
// with the same key resumes the same execution and sends it.
func TestDriverNotSentResumes(t *testing.T) {
	l := startLedgerWith(t, orderTools)
	ex := &scripted{l: l, script: []executor.Outcome{
		{Observed: executor.NotSent, Reason: "connection refused before the request was written"},
		answered("x"),
	}}
	d := dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":8}`)},
		OperationKey: "op-not-sent",
	}
	first := d.Run(context.Background(), tool, in)
	if first.State != dispatch.StateNotSent || first.Execution.GetState() != pb.State_STATE_NOT_SENT {
		t.Fatalf("first call: %+v", first)
	}
	retry := d.Run(context.Background(), tool, in)
	if retry.State != dispatch.StateCompleted || retry.Execution.GetExecutionId() != first.Execution.GetExecutionId() {
		t.Fatalf("retry did not resume %s: %+v", first.Execution.GetExecutionId(), retry)
	}
	if n := ex.sends.Load(); n != 2 {
		t.Fatalf("%d sends, want 2", n)
	}
	if c := retry.Execution.GetDispatchCount(); c != 2 {
		t.Fatalf("dispatch count %d, want 2", c)
	}
	ex.checkOrder(t)
}

// A status_query call whose outcome is unknown asks the target. A status
// answering "absent" (404) proves nothing before the dispatch deadline (the
// target may still be working: nothing is resent); after it, it proves the
// call was not executed and the call is run again, once. A status
// answering "done" resolves it without a send.
func TestDriverStatusQuery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    dispatch.Status
		wantSends int32
		wantState string
	}{
		{"absent-reruns", dispatch.Status{Finding: dispatch.Absent, Evidence: "absence proven (status 404)"}, 2, dispatch.StateCompleted},
		{"done-resolves", dispatch.Status{Finding: dispatch.Done, Code: 200, Body: `{"ok":1}`, Evidence: "the status endpoint answered 200"}, 1, dispatch.StateCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{}
			l := startLedgerYAMLClock(t, orderTools, clk)
			ex := &scripted{l: l, status: tc.status, script: []executor.Outcome{
				{Observed: executor.Unknown, Reason: "the connection dropped after the request was written"},
				answered("x"),
			}}
			d := dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
			d.Handle("fake", ex)
			tool := config.Tool{Name: "deploy", Channel: "fake"}
			in := ledger.BeginInput{
				Action:       fingerprint.Action{Actor: "agent-7", Tool: "deploy", Channel: "fake", Arguments: []byte(`{"release":"` + tc.name + `"}`)},
				OperationKey: "op-" + tc.name,
			}
			first := d.Run(context.Background(), tool, in)
			if first.State != dispatch.StateOutcomeUnknown {
				t.Fatalf("first call: %+v", first)
			}
			if tc.status.Finding == dispatch.Absent {
				early := d.Run(context.Background(), tool, in)
				if early.State != dispatch.StateOutcomeUnknown || ex.sends.Load() != 1 {
					t.Fatalf("a 404 before the dispatch deadline: %+v, %d sends", early, ex.sends.Load())
				}
				clk.Advance(time.Hour)
			}
			retry := d.Run(context.Background(), tool, in)
			if retry.State != tc.wantState {
				t.Fatalf("retry: %+v", retry)
			}
			if tc.status.Finding == dispatch.Absent && retry.Execution.GetExecutionId() != first.Execution.GetExecutionId() {
				t.Fatalf("the re-run is a new execution %s, want %s", retry.Execution.GetExecutionId(), first.Execution.GetExecutionId())
			}
			if n := ex.sends.Load(); n != tc.wantSends {
				t.Fatalf("%d sends, want %d", n, tc.wantSends)
			}
			ex.checkOrder(t)
		})
	}
}
