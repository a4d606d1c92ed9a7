package dispatch_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
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
	d := quietDriver(l)
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
	// Begun without a dispatch token (as Connect's Begin is): ACCEPTED,
	// then the driver's own DISPATCHED before the send.
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":7}`)},
		OperationKey: "op-order-separate",
	}
	res, err := l.Begin(context.Background(), in)
	if err != nil || res.Execution.GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("Begin without a token: %v, %v", res.Execution.GetState(), err)
	}
	for range 4 { // racing callers acting on it: one wins DISPATCHED and sends
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a := d.Act(context.Background(), tool, in, res); a.State != dispatch.StateCompleted {
				t.Errorf("separate dispatch: %+v", a)
			}
		}()
	}
	wg.Wait()
	if n := ex.sends.Load(); n != 3 {
		t.Fatalf("%d sends, want 3", n)
	}
	ex.checkOrder(t)
}

// A call through the driver to a tool that needs no approval and holds no
// budget is accepted and dispatched in one decision: the record is
// DISPATCHED from its first event (accepted and first dispatched at the
// same instant) with the token and deadline a separate DISPATCHED records
// (now + timeout + ledger.DispatchGrace); the send comes after it landed.
// A tool that needs approval is still only accepted.
func TestDriverAcceptsAndDispatchesInOneEvent(t *testing.T) {
	l := startLedgerWith(t, orderTools+`  approve_me:
    retry: idempotency_key
    match_window: 10m
    approval: per_use
`)
	ex := &scripted{l: l, script: []executor.Outcome{answered("x")}}
	d := quietDriver(l)
	d.Handle("fake", ex)
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "deploy", Channel: "fake", Arguments: []byte(`{"release":"r-1"}`)},
		OperationKey: "op-one-event",
	}
	res, err := d.Begin(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	x := res.Execution
	if res.Decision != pb.Decision_DECISION_NEW || x.GetState() != pb.State_STATE_DISPATCHED {
		t.Fatalf("Begin through the driver: %v in %v", res.Decision, x.GetState())
	}
	if !strings.HasPrefix(x.GetDispatchToken(), "dsp_") || x.GetDispatchCount() != 1 ||
		!x.GetDispatchedAt().AsTime().Equal(x.GetAcceptedAt().AsTime()) {
		t.Fatalf("not one decision: token %q, count %d, accepted %v, dispatched %v",
			x.GetDispatchToken(), x.GetDispatchCount(), x.GetAcceptedAt().AsTime(), x.GetDispatchedAt().AsTime())
	}
	if want := x.GetDispatchedAt().AsTime().Add(contract.DefaultTimeout + ledger.DispatchGrace); !x.GetDispatchDeadline().AsTime().Equal(want) {
		t.Fatalf("dispatch deadline %v, want %v (dispatched + timeout + grace)", x.GetDispatchDeadline().AsTime(), want)
	}
	// The log itself holds it DISPATCHED before anything is sent.
	if got, err := l.Get(context.Background(), x.GetExecutionId()); err != nil || got.GetState() != pb.State_STATE_DISPATCHED || got.GetDispatchToken() != x.GetDispatchToken() {
		t.Fatalf("log: %v, %v", got.GetState(), err)
	}
	if n := ex.sends.Load(); n != 0 {
		t.Fatalf("%d sends before Act", n)
	}
	// The same token asks again as a MarkDispatched whose answer was lost:
	// answered as the winner, nothing appended.
	again, err := l.Transition(context.Background(), ledger.Change{ExecutionID: x.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DISPATCHED, DispatchToken: x.GetDispatchToken()})
	if err != nil || again.GetStreamSeq() != x.GetStreamSeq() {
		t.Fatalf("same token again: seq %d (want %d), %v", again.GetStreamSeq(), x.GetStreamSeq(), err)
	}
	if a := d.Act(context.Background(), config.Tool{Name: "deploy", Channel: "fake"}, in, res); a.State != dispatch.StateCompleted {
		t.Fatalf("act: %+v", a)
	}
	if n := ex.sends.Load(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
	ex.checkOrder(t)

	pu := ledger.BeginInput{Action: fingerprint.Action{Actor: "agent-7", Tool: "approve_me", Channel: "fake", Arguments: []byte(`{}`)}, OperationKey: "op-approval"}
	if a := d.Run(context.Background(), config.Tool{Name: "approve_me", Channel: "fake"}, pu); a.State != dispatch.StateAwaitingApproval ||
		a.Execution.GetDispatchedAt() != nil || a.Execution.GetDispatchToken() != "" {
		t.Fatalf("per-use approval: %+v", a)
	}
	if n := ex.sends.Load(); n != 1 {
		t.Fatalf("%d sends, want 1 (nothing for the tool awaiting approval)", n)
	}
}

// NOT_SENT (the executor proved nothing left) answers not_sent; the retry
// with the same key resumes the same execution and sends it.
func TestDriverNotSentResumes(t *testing.T) {
	l := startLedgerWith(t, orderTools)
	ex := &scripted{l: l, script: []executor.Outcome{
		{Observed: executor.NotSent, Reason: "connection refused before the request was written"},
		answered("x"),
	}}
	d := quietDriver(l)
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
		{"absent-reruns", dispatch.Status{Finding: dispatch.Absent, Evidence: "the status endpoint answered 404 (no such request)"}, 2, dispatch.StateCompleted},
		{"done-resolves", dispatch.Status{Finding: dispatch.Done, Code: 200, Body: `{"ok":1}`, Evidence: "the status endpoint answered 200"}, 1, dispatch.StateCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{}
			l := startLedgerYAMLClock(t, orderTools, clk)
			ex := &scripted{l: l, status: tc.status, script: []executor.Outcome{
				{Observed: executor.Unknown, Reason: "the connection dropped after the request was written"},
				answered("x"),
			}}
			d := quietDriver(l)
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
