package dispatch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
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

func startLedger(t *testing.T) *ledger.Service { return startLedgerClock(t, nil) }

// testConfig: charge (idempotency_key) and lookup (status_query, 200ms
// timeout: its dispatch deadline is 200ms + ledger.DispatchGrace).
const testConfig = `tools:
  charge:
    retry: idempotency_key
    match_window: 10m
  lookup:
    retry: status_query
    match_window: 10m
    timeout: 200ms
`

// clock is a settable clock for the ledger (and so the driver).
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time           { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(by time.Duration) { c.off.Add(int64(by)) }

func startLedgerClock(t *testing.T, clk *clock) *ledger.Service {
	t.Helper()
	return startLedgerYAMLClock(t, testConfig, clk)
}

// Two transitions decided on one head (both read ACCEPTED before either
// appends, held there by Require): the compare-and-set on the execution's
// subject lets exactly one DISPATCHED land, and the loser, deciding again
// on the winner's event, is refused. TestDriverRacingCallersSendOnce races
// the same thing through the driver, where the overlap is up to the
// scheduler; here it is certain.
func TestTransitionsFromOneHeadLandOnce(t *testing.T) {
	l := startLedger(t)
	ctx := context.Background()
	res, err := l.Begin(ctx, ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":5}`)},
		OperationKey: "op-one-head",
	})
	if err != nil || res.Execution.GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("Begin: %v, %v", res.Execution.GetState(), err)
	}
	var arrived sync.WaitGroup
	arrived.Add(2)
	var once [2]sync.Once
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, token := range []string{"tok-a", "tok-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Transition(ctx, ledger.Change{
				ExecutionID: res.Execution.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DISPATCHED, DispatchToken: token,
				Require: func(x *pb.Execution, _ time.Time) error {
					once[i].Do(func() { // the first round only: both hold ACCEPTED
						if x.GetState() != pb.State_STATE_ACCEPTED {
							t.Errorf("transition %d read %v first", i, x.GetState())
						}
						arrived.Done()
						arrived.Wait()
					})
					return nil
				},
			})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		var ite *ledger.IllegalTransitionError
		switch {
		case err == nil:
			won++
		case errors.As(err, &ite) && ite.State == pb.State_STATE_DISPATCHED:
		default:
			t.Fatalf("transition %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d DISPATCHED landed from one ACCEPTED head, want 1 (errors %v)", won, errs)
	}
}

// Many callers racing the same operation through one driver (a real
// embedded JetStream and Pebble underneath): exactly one send, and every
// caller gets the one stored result.
func TestDriverRacingCallersSendOnce(t *testing.T) {
	l := startLedger(t)
	ex := &counting{delay: 50 * time.Millisecond}
	d := quietDriver(l)
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
	// Begun without a dispatch token (ACCEPTED, as Connect's Begin leaves
	// it), then acted on by racing callers: they race for DISPATCHED and
	// only the winner sends.
	in.OperationKey = "op-race-3"
	res, err := l.Begin(context.Background(), in)
	if err != nil || res.Execution.GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("Begin without a token: %v, %v", res.Execution.GetState(), err)
	}
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = d.Act(context.Background(), tool, in, res)
		}()
	}
	wg.Wait()
	if n := ex.sends.Load(); n != 3 {
		t.Fatalf("%d sends after racing dispatches of one accepted execution, want 3", n)
	}
	for i, a := range answers {
		if a.State != dispatch.StateCompleted || a.Execution.GetExecutionId() != res.Execution.GetExecutionId() {
			t.Fatalf("racing dispatch %d: %+v", i, a)
		}
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
	d := quietDriver(l)
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
	if a.State != dispatch.StateInFlight || !strings.Contains(a.Why, "in flight until "+a.Execution.GetDispatchDeadline().AsTime().UTC().Format(time.RFC3339)) ||
		!strings.Contains(a.Why, "nothing was resent") {
		t.Fatalf("attached call: %+v", a)
	}
	if f := <-first; f.State != dispatch.StateCompleted || ex.sends.Load() != 1 {
		t.Fatalf("first call: %+v, %d sends", f, ex.sends.Load())
	}
}

// gated is an executor whose sends block until release is closed.
type gated struct {
	sends   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (g *gated) Send(_ config.Tool, id string, _ []byte) executor.Outcome {
	if g.sends.Add(1) == 1 {
		close(g.started)
	}
	<-g.release
	return executor.Outcome{Observed: executor.Answered, Status: 201, Body: `{"late":"` + id + `"}`, ContentType: "application/json"}
}

func (g *gated) Status(context.Context, config.Tool, string) dispatch.Status {
	return dispatch.Status{Evidence: "no status query"}
}

// A result that arrives after the deadline expiry recorded OUTCOME_UNKNOWN
// is not dropped: it resolves the execution as completed (evidence: the
// target answered after the deadline) and the caller gets it.
func TestDriverLateResultResolvesCompleted(t *testing.T) {
	clk := &clock{}
	l := startLedgerClock(t, clk)
	ex := &gated{started: make(chan struct{}), release: make(chan struct{})}
	d := quietDriver(l)
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":8}`)},
		OperationKey: "op-late-1",
	}
	got := make(chan dispatch.Answer, 1)
	go func() { got <- d.Run(context.Background(), tool, in) }()
	<-ex.started
	res, err := l.Begin(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Execution.GetExecutionId()
	clk.Advance(time.Hour) // past the dispatch deadline
	if x, _, err := l.ExpireOverdue(context.Background(), id); err != nil || x.GetState() != pb.State_STATE_OUTCOME_UNKNOWN {
		t.Fatalf("expire: %v, %v", x, err)
	}
	close(ex.release)
	a := <-got
	if a.State != dispatch.StateCompleted || a.Execution.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED ||
		a.Execution.GetResultBody() != `{"late":"`+id+`"}` {
		t.Fatalf("late result: %+v", a)
	}
	if ex.sends.Load() != 1 {
		t.Fatalf("%d sends, want 1", ex.sends.Load())
	}
}

// lost is an executor whose first send's outcome is unknown (a timeout)
// and whose status endpoint shows nothing; later sends answer.
type lost struct{ sends atomic.Int32 }

func (l *lost) Send(_ config.Tool, id string, _ []byte) executor.Outcome {
	if l.sends.Add(1) == 1 {
		return executor.Outcome{Observed: executor.Unknown, Reason: "timed out"}
	}
	return executor.Outcome{Observed: executor.Answered, Status: 200, Body: `{"id":"` + id + `"}`, ContentType: "application/json"}
}

func (l *lost) Status(context.Context, config.Tool, string) dispatch.Status {
	return dispatch.Status{Finding: dispatch.Absent, Evidence: "the status endpoint answered 404 (no such request)"}
}

// A status query's "not found" before the dispatch deadline is not proof
// of absence: the retry is told the outcome is unknown and to ask again
// after the deadline, and nothing is resent. After the deadline the
// operation key's execution is resolved NOT_EXECUTED and resumed: the same
// execution (so the same Idempotency-Key) is dispatched again.
func TestDriverNotFoundProvesAbsenceOnlyAfterDeadline(t *testing.T) {
	clk := &clock{}
	l := startLedgerClock(t, clk)
	ex := &lost{}
	d := quietDriver(l)
	d.Handle("fake", ex)
	tool := config.Tool{Name: "lookup", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "lookup", Channel: "fake", Arguments: []byte(`{"q":1}`)},
		OperationKey: "op-lookup-1",
	}
	first := d.Run(context.Background(), tool, in)
	if first.State != dispatch.StateOutcomeUnknown {
		t.Fatalf("first call: %+v", first)
	}
	id := first.Execution.GetExecutionId()
	deadline := first.Execution.GetDispatchDeadline().AsTime().UTC().Format(time.RFC3339)
	early := d.Run(context.Background(), tool, in)
	if early.State != dispatch.StateOutcomeUnknown || !strings.Contains(early.Why, "ask again after "+deadline) || ex.sends.Load() != 1 {
		t.Fatalf("retry before the deadline: %+v, %d sends", early, ex.sends.Load())
	}
	if x, err := l.Get(context.Background(), id); err != nil || x.GetState() != pb.State_STATE_OUTCOME_UNKNOWN {
		t.Fatalf("before the deadline: %v, %v", x, err)
	}
	clk.Advance(time.Hour)
	late := d.Run(context.Background(), tool, in)
	if late.State != dispatch.StateCompleted || late.Execution.GetExecutionId() != id || ex.sends.Load() != 2 {
		t.Fatalf("retry after the deadline: %+v, %d sends", late, ex.sends.Load())
	}
	// Two retries, two attaches: the late retry asked the ledger again
	// after it proved absence (decideAgain), and that is the same call,
	// not a third retry (audit s13: attach_count 3).
	if n := late.Execution.GetAttachCount(); n != 2 {
		t.Fatalf("attach_count %d after two retries, want 2", n)
	}
}

// An attached call that waits for the call in flight and gets its result
// says so, in the past: it was in flight, this call waited, the result is
// returned (audit s1 1a: a completed answer said "the prior execution is
// in flight until …; nothing was resent").
func TestDriverAttachedCallWaitsForResult(t *testing.T) {
	l := startLedger(t)
	ex := &counting{delay: 300 * time.Millisecond}
	d := quietDriver(l)
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action: fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":7}`)},
	}
	first := make(chan dispatch.Answer, 1)
	go func() { first <- d.Run(context.Background(), tool, in) }()
	for ex.sends.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	a := d.Run(context.Background(), tool, in)
	if a.State != dispatch.StateCompleted || ex.sends.Load() != 1 {
		t.Fatalf("attached call: %+v, %d sends", a, ex.sends.Load())
	}
	if strings.Contains(a.Why, "in flight until") || !strings.Contains(a.Why, "it was in flight") ||
		!strings.Contains(a.Why, "waited for its result") || !strings.Contains(a.Why, "nothing was resent") {
		t.Fatalf("a completed answer that reads as in flight: %q", a.Why)
	}
	if f := <-first; f.State != dispatch.StateCompleted {
		t.Fatalf("first call: %+v", f)
	}
}

// An attached call answered RESEND_SAME_KEY says why it sent again, as
// every other attached answer says why it did what it did: it was resent
// with the same Idempotency-Key, and why that is safe.
func TestDriverResendSaysWhy(t *testing.T) {
	l := startLedger(t)
	ex := &lost{}
	d := quietDriver(l)
	d.Handle("fake", ex)
	tool := config.Tool{Name: "charge", Channel: "fake"}
	in := ledger.BeginInput{
		Action:       fingerprint.Action{Actor: "agent-7", Tool: "charge", Channel: "fake", Arguments: []byte(`{"amount":9}`)},
		OperationKey: "op-resend-why",
	}
	first := d.Run(context.Background(), tool, in)
	if first.State != dispatch.StateOutcomeUnknown {
		t.Fatalf("first call: %+v", first)
	}
	id := first.Execution.GetExecutionId()
	retry := d.Run(context.Background(), tool, in)
	if retry.State != dispatch.StateCompleted || retry.Execution.GetExecutionId() != id || ex.sends.Load() != 2 ||
		!strings.Contains(retry.Why, "attached to "+id) || !strings.Contains(retry.Why, "timed out") ||
		!strings.Contains(retry.Why, "resent with the same Idempotency-Key ("+id+")") {
		t.Fatalf("resend: %+v (%d sends)", retry, ex.sends.Load())
	}
}

// stuck is an executor whose first send hangs until release is closed (a
// gateway that dies at the target, as far as the ledger can tell); every
// later send answers 201 at once.
type stuck struct {
	sends   atomic.Int32
	started chan string // the first send's execution id
	release chan struct{}
}

func (s *stuck) Send(_ config.Tool, id string, _ []byte) executor.Outcome {
	if s.sends.Add(1) == 1 {
		s.started <- id
		<-s.release
	}
	return executor.Outcome{Observed: executor.Answered, Status: 201, Body: `{"id":"` + id + `"}`, ContentType: "application/json"}
}

func (s *stuck) Status(context.Context, config.Tool, string) dispatch.Status {
	return dispatch.Status{Evidence: "no status query"}
}

// A retry that attached while the first call was in flight, and is still
// waiting when the dispatch deadline passes, gets the class recovery as a
// retry arriving after the deadline would (DESIGN §2, "a dispatch has a
// deadline"): the wait records OUTCOME_UNKNOWN and the ledger decides
// again. An idempotency_key tool is resent with the same key; an
// irreversible one answers needs_review and sends nothing.
func TestDriverWaitPastDeadlineGetsClassRecovery(t *testing.T) {
	const yaml = `tools:
  charge:
    retry: idempotency_key
    match_window: 10m
  wire:
    retry: irreversible
    match_window: 10m
`
	for _, tc := range []struct {
		tool, state string
		sends       int32
		why         string
	}{
		{"charge", dispatch.StateCompleted, 2, "resent with the same Idempotency-Key"},
		{"wire", dispatch.StateNeedsReview, 1, ""},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			clk := &clock{}
			l := startLedgerYAMLClock(t, yaml, clk)
			ex := &stuck{started: make(chan string, 1), release: make(chan struct{})}
			d := quietDriver(l)
			d.Handle("fake", ex)
			tool := config.Tool{Name: tc.tool, Channel: "fake"}
			in := ledger.BeginInput{
				Action:       fingerprint.Action{Actor: "agent-7", Tool: tc.tool, Channel: "fake", Arguments: []byte(`{"amount":10}`)},
				OperationKey: "op-wait-" + tc.tool,
			}
			first := make(chan dispatch.Answer, 1)
			go func() { first <- d.Run(context.Background(), tool, in) }()
			id := <-ex.started
			retry := make(chan dispatch.Answer, 1)
			go func() { retry <- d.Run(context.Background(), tool, in) }()
			// The retry attached (and so waits) before the clock moves.
			for stop := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				x, err := l.Get(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if x.GetAttachCount() >= 1 {
					break
				}
				if time.Now().After(stop) {
					t.Fatal("the retry never attached")
				}
			}
			clk.Advance(time.Hour) // past the dispatch deadline
			a := <-retry
			if a.State != tc.state || a.Execution.GetExecutionId() != id || ex.sends.Load() != tc.sends || !strings.Contains(a.Why, tc.why) {
				t.Fatalf("retry waiting past the deadline: %+v (%d sends)", a, ex.sends.Load())
			}
			close(ex.release)
			<-first
			if ex.sends.Load() != tc.sends {
				t.Fatalf("%d sends, want %d", ex.sends.Load(), tc.sends)
			}
		})
	}
}

// Resume (an approved task whose agent only polls) sends an AUTHORIZED
// execution once however many resumes race, and never one that left
// AUTHORIZED after the caller read it: denied (a person, or the agent's
// tasks/cancel), or dispatched by another call and NOT_SENT since, which
// only a retry of the call resumes.
func TestDriverResumeOnlyFromAuthorized(t *testing.T) {
	l := startLedgerYAMLClock(t, `tools:
  approve:
    retry: idempotency_key
    match_window: 10m
    approval: per_use
`, nil)
	ex := &counting{delay: 20 * time.Millisecond}
	d := quietDriver(l)
	d.Handle("fake", ex)
	tool := config.Tool{Name: "approve", Channel: "fake"}
	ctx := context.Background()
	approved := func(key string) (ledger.BeginInput, *pb.Execution) {
		t.Helper()
		in := ledger.BeginInput{OperationKey: key,
			Action: fingerprint.Action{Actor: "agent-7", Tool: "approve", Channel: "fake", Arguments: []byte(`{"n":1}`)}}
		res, err := d.Begin(ctx, in)
		if err != nil || res.Execution.GetState() != pb.State_STATE_AWAITING_APPROVAL {
			t.Fatalf("Begin: %v, %v", res.Execution.GetState(), err)
		}
		x, err := l.Transition(ctx, ledger.Change{ExecutionID: res.Execution.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_AUTHORIZED,
			Apply: func(x *pb.Execution) { x.AuthorizedBy = "alice" }})
		if err != nil {
			t.Fatal(err)
		}
		return in, x
	}
	move := func(x *pb.Execution, events ...pb.EventType) {
		t.Helper()
		for _, e := range events {
			if _, err := l.Transition(ctx, ledger.Change{ExecutionID: x.GetExecutionId(), Event: e, DispatchToken: "dsp_other",
				Apply: func(x *pb.Execution) { x.Reason = "moved by the test" }}); err != nil {
				t.Fatal(err)
			}
		}
	}

	in, x := approved("op-1")
	var wg sync.WaitGroup
	answers := make([]dispatch.Answer, 6)
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = d.Resume(ctx, tool, in, x) }()
	}
	wg.Wait()
	for i, a := range answers {
		if a.State != dispatch.StateCompleted || a.Execution.GetExecutionId() != x.GetExecutionId() {
			t.Fatalf("resume %d: %+v", i, a)
		}
	}
	if n := ex.sends.Load(); n != 1 {
		t.Fatalf("%d sends of one approved execution, want 1", n)
	}

	in, x = approved("op-2")
	move(x, pb.EventType_EVENT_TYPE_DENIED)
	if a := d.Resume(ctx, tool, in, x); a.State != dispatch.StateDenied || ex.sends.Load() != 1 {
		t.Fatalf("resume of a denied execution: %+v, %d sends", a, ex.sends.Load())
	}

	in, x = approved("op-3")
	move(x, pb.EventType_EVENT_TYPE_DISPATCHED, pb.EventType_EVENT_TYPE_NOT_SENT)
	if a := d.Resume(ctx, tool, in, x); a.State != dispatch.StateNotSent || ex.sends.Load() != 1 {
		t.Fatalf("resume of an execution another call dispatched: %+v, %d sends", a, ex.sends.Load())
	}
}

// quietDriver is a driver on l that logs nowhere.
func quietDriver(l *ledger.Service) *dispatch.Driver {
	return dispatch.New(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
}
