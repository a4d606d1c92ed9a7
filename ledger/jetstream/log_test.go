package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/ledger"
)

var testSpec = StreamSpec{Name: "TEST_EVENTS", Subjects: []string{"t.>"}}

func openTestLog(t testing.TB, opt Options) *Log {
	t.Helper()
	_, nc := natstest.Start(t)
	l, err := Open(context.Background(), nc, testSpec, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func testEvent(subject string, prev []byte) *pb.Event {
	ev := &pb.Event{EventId: fmt.Sprintf("evt_%s_%d", subject, time.Now().UnixNano()), Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: subject,
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: &pb.Execution{State: pb.State_STATE_ACCEPTED}}}}
	ledger.Seal(ev, prev)
	return ev
}

func msg(subject string, expected uint64) ledger.Message {
	return ledger.Message{Subject: subject, ExpectedSeq: expected, Event: testEvent(subject, nil)}
}

func streamMsgs(t *testing.T, l *Log) uint64 {
	t.Helper()
	info, err := l.Stream().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestAppendIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	seqs, err := l.Append(ctx, msg("t.a", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, msg("t.a", 0)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second append expecting an empty subject: got %v, want ErrConflict", err)
	}
	if _, err := l.Append(ctx, msg("t.a", seqs[0])); err != nil {
		t.Fatalf("append at the right sequence: %v", err)
	}
	if n := streamMsgs(t, l); n != 2 {
		t.Fatalf("stream holds %d events, want 2", n)
	}
	h, err := l.Last(ctx, "t.a")
	if err != nil || h.Seq != 2 {
		t.Fatalf("Last = %+v, %v; want seq 2", h, err)
	}
	if _, err := l.Last(ctx, "t.none"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Last of an empty subject: %v, want ErrNotFound", err)
	}
}

func TestStreamDeniesDeleteAndPurge(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	if _, err := l.Append(ctx, msg("t.a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Stream().Purge(ctx); err == nil {
		t.Fatal("purge succeeded on an append-only stream")
	}
	if err := l.Stream().DeleteMsg(ctx, 1); err == nil {
		t.Fatal("delete succeeded on an append-only stream")
	}
}

// A decision of several messages lands whole or not at all.
func TestMultiMessageDecisionIsAtomic(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	if _, err := l.Append(ctx, msg("t.taken", 0)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Append(ctx, msg("t.fresh", 0), msg("t.taken", 0))
	if !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
	if _, err := l.Last(ctx, "t.fresh"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("half of a failed decision landed: %v", err)
	}
	seqs, err := l.Append(ctx, msg("t.fresh", 0), msg("t.other", 0))
	if err != nil {
		t.Fatal(err)
	}
	if seqs[1] != seqs[0]+1 {
		t.Fatalf("decision not contiguous: %v", seqs)
	}
}

// One conflicting decision in a batch fails alone; the others commit, and
// no success is reported for what did not land.
func TestBatchIsolatesConflict(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{InflightBatches: 1})
	if _, err := l.Append(ctx, msg("t.hot", 0)); err != nil {
		t.Fatal(err)
	}
	mk := func(m ...ledger.Message) *decision {
		d := &decision{ctx: ctx, done: make(chan struct{})}
		for _, x := range m {
			d.msgs = append(d.msgs, outMsg{subject: x.Subject, expected: x.ExpectedSeq, data: mustMarshal(t, x.Event)})
		}
		return d
	}
	var batch []*decision
	for i := range 10 {
		batch = append(batch, mk(msg(fmt.Sprintf("t.ok%d", i), 0)))
	}
	bad := mk(msg("t.hot", 0)) // the subject already has an event: conflict at the server
	batch = append(batch[:5], append([]*decision{bad}, batch[5:]...)...)
	l.c.commit(batch, 0)
	for _, d := range batch {
		<-d.done
		if d == bad {
			if !errors.Is(d.err, ledger.ErrConflict) {
				t.Fatalf("conflicting decision: %v, want ErrConflict", d.err)
			}
			continue
		}
		if d.err != nil {
			t.Fatalf("innocent decision failed: %v", d.err)
		}
		h, err := l.Last(ctx, d.msgs[0].subject)
		if err != nil || h.Seq != d.seqs[0] {
			t.Fatalf("reported seq %d for %s, log has %+v (%v)", d.seqs[0], d.msgs[0].subject, h.Seq, err)
		}
	}
	if n := streamMsgs(t, l); n != 11 {
		t.Fatalf("stream holds %d events, want 11", n)
	}
}

// Many concurrent callers: every success landed at the sequence reported,
// and the subject-level compare-and-set lets exactly one of the callers
// that raced for the same subject win.
func TestConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	const callers, perCaller = 64, 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	seen := map[uint64]bool{}
	errs := make(chan error, callers*perCaller)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				own := fmt.Sprintf("t.own.%d.%d", c, i)
				shared := fmt.Sprintf("t.shared.%d", i)
				seqs, err := l.Append(ctx, msg(own, 0))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if seen[seqs[0]] {
					errs <- fmt.Errorf("sequence %d reported twice", seqs[0])
				}
				seen[seqs[0]] = true
				mu.Unlock()
				if _, err := l.Append(ctx, msg(shared, 0)); err == nil {
					mu.Lock()
					wins[shared]++
					mu.Unlock()
				} else if !errors.Is(err, ledger.ErrConflict) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range perCaller {
		if w := wins[fmt.Sprintf("t.shared.%d", i)]; w != 1 {
			t.Fatalf("shared subject %d: %d winners, want 1", i, w)
		}
	}
	if n := streamMsgs(t, l); n != callers*perCaller+perCaller {
		t.Fatalf("stream holds %d events, want %d", n, callers*perCaller+perCaller)
	}
}

// A condition on a subject filter covers every subject under it: the
// intent of docs/design.md owns the decision to create any of its executions.
func TestConditionOnSubjectFilter(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	first := ledger.Message{Subject: "t.intent.a", CheckSubject: "t.intent.*", ExpectedSeq: 0, Event: testEvent("t.intent.a", nil)}
	seqs, err := l.Append(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	second := ledger.Message{Subject: "t.intent.b", CheckSubject: "t.intent.*", ExpectedSeq: 0, Event: testEvent("t.intent.b", nil)}
	if _, err := l.Append(ctx, second); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second execution of one intent: %v, want ErrConflict", err)
	}
	var ce *ledger.ConflictError
	if _, err := l.Append(ctx, second); !errors.As(err, &ce) || ce.ActualSeq != seqs[0] {
		t.Fatalf("conflict should name the intent's sequence %d: %v", seqs[0], err)
	}
	second.ExpectedSeq = seqs[0]
	if _, err := l.Append(ctx, second); err != nil {
		t.Fatal(err)
	}
	// Another event on one execution moves the whole intent.
	if _, err := l.Append(ctx, ledger.Message{Subject: "t.intent.a", ExpectedSeq: seqs[0], Event: testEvent("t.intent.a", nil)}); err != nil {
		t.Fatal(err)
	}
	third := ledger.Message{Subject: "t.intent.c", CheckSubject: "t.intent.*", ExpectedSeq: seqs[0] + 1, Event: testEvent("t.intent.c", nil)}
	if _, err := l.Append(ctx, third); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("create on a stale intent: %v, want ErrConflict", err)
	}
}

// Several events on one subject in one decision: the first carries the
// condition, the rest follow it, and all land or none do.
func TestFollowingMessagesShareOneCondition(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	seqs, err := l.Append(ctx, msg("t.acct", 0), ledger.Message{Subject: "t.acct", Follows: true, Event: testEvent("t.acct", nil)})
	if err != nil || seqs[1] != seqs[0]+1 {
		t.Fatalf("chain of two: %v %v", seqs, err)
	}
	_, err = l.Append(ctx, msg("t.acct", seqs[0]), ledger.Message{Subject: "t.acct", Follows: true, Event: testEvent("t.acct", nil)})
	if !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("stale chain: %v, want ErrConflict", err)
	}
	if n := streamMsgs(t, l); n != 2 {
		t.Fatalf("a refused chain left %d events, want 2", n)
	}
	if _, err := l.Append(ctx, ledger.Message{Subject: "t.other", Follows: true, Event: testEvent("t.other", nil)}); err == nil {
		t.Fatal("a following message without a leader was accepted")
	}
}

// TestCompareAndSetAcrossWriters holds the condition to the server, not to
// a writer's own cache: two Logs (two gateways' committers, each knowing
// nothing of the other's writes) race for one subject, and the server
// refuses the second write that expected the subject to be empty. With the
// Nats-Expected-Last-Subject-Sequence header gone, both would land.
func TestCompareAndSetAcrossWriters(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	open := func() *Log {
		l, err := Open(ctx, nc, testSpec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	a, b := open(), open()
	if _, err := a.Append(ctx, msg("t.x", 0)); err != nil {
		t.Fatal(err)
	}
	_, err := b.Append(ctx, msg("t.x", 0))
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || ce.ActualSeq != 1 {
		t.Fatalf("second writer expecting an empty subject: got %v, want a conflict naming sequence 1", err)
	}
	// The filter condition, too: an intent's new execution under
	// t.intent.* must lose to the other writer's.
	if _, err := a.Append(ctx, ledger.Message{Subject: "t.i.one", CheckSubject: "t.i.*", Event: testEvent("t.i.one", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, ledger.Message{Subject: "t.i.two", CheckSubject: "t.i.*", Event: testEvent("t.i.two", nil)}); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second writer creating under a moved filter: got %v, want ErrConflict", err)
	}
	if n := streamMsgs(t, a); n != 2 {
		t.Fatalf("stream holds %d events, want 2", n)
	}
}

// A previous write still replicating (10164), no leader (10008, 503) and a
// full batch pipeline are answers that change on their own: retried with a
// bounded backoff, never read as a lost compare-and-set. Only 10071 is one.
func TestTransientAnswers(t *testing.T) {
	for _, tc := range []struct {
		e                   apiError
		transient, conflict bool
	}{
		{apiError{Code: 400, ErrCode: errCodeWrongLastSeq}, false, true},
		{apiError{Code: 400, ErrCode: errCodeWrongLastSeqConstant}, true, false},
		{apiError{Code: 503, ErrCode: errCodeClusterNotAvail}, true, false},
		{apiError{Code: 429, ErrCode: errCodeBatchTooManyInflight}, true, false},
		{apiError{Code: 500, ErrCode: errCodeStreamOffline}, true, false},
		{apiError{Code: 400, ErrCode: 10003}, false, false},
	} {
		if got := tc.e.transient(); got != tc.transient {
			t.Errorf("%v transient = %v", &tc.e, got)
		}
		if got := tc.e.conflict(); got != tc.conflict {
			t.Errorf("%v conflict = %v", &tc.e, got)
		}
		if got := Transient(&tc.e); got != tc.transient {
			t.Errorf("Transient(%v) = %v", &tc.e, got)
		}
	}
	var total time.Duration
	for a := range transientRetries {
		d := transientBackoff(a)
		if d > transientBackoffMax || d < transientBackoffFirst/2 {
			t.Fatalf("backoff %d = %v, want within [%v, %v]", a, d, transientBackoffFirst/2, transientBackoffMax)
		}
		total += d
	}
	if total > time.Duration(transientRetries)*transientBackoffMax {
		t.Fatalf("total backoff %v unbounded", total)
	}
}

// On a cluster, a single-message append whose first try goes unanswered
// (no stream leader took it) is sent again with the same Nats-Msg-Id. Here
// the first copy landed after all: the duplicate window answers with that
// copy's sequence, and the append succeeds once. A single server is tried
// once for the whole wait; its silence is an unknown outcome. Nothing is
// stored twice either way.
func TestUnansweredAppendIsResent(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		c := natstest.StartCluster(t, 3, natstest.ClusterOptions{})
		// One node for both clients: the silent responder's interest is
		// known there at once (routes spread it later).
		seqs, stored, id, err := resendOnce(t, c.URL(0), c.CredsDir, 3, 3, 20*time.Second)
		if err != nil || len(seqs) != 1 || seqs[0] != 1 || stored != 1 || id == "" {
			t.Fatalf("append: seqs %v, err %v; stream holds %d; message id %q; want seq 1, one message, an id", seqs, err, stored, id)
		}
	})
	t.Run("single server", func(t *testing.T) {
		ns, dir := natstest.StartAuth(t)
		_, stored, id, err := resendOnce(t, ns.ClientURL(), dir, 1, 2, 3*time.Second)
		if !errors.Is(err, ledger.ErrAppendUnknown) || errors.Is(err, ledger.ErrConflict) || stored != 1 || id != "" {
			t.Fatalf("append: %v; stream holds %d; message id %q; want unknown (not a conflict), one message, no id (nothing resends it)", err, stored, id)
		}
	})
}

// resendOnce appends one message to late.x while a silent responder takes
// the first try, creates the stream and stores that very message (as if
// it had landed and its acknowledgement was lost). id is the first try's
// Nats-Msg-Id. ackWait is the append's whole wait: on a cluster it must
// outlast the new stream's placement, which a loaded machine answers late
// (the create is retried, as EnsureConfig retries it).
func resendOnce(t *testing.T, url, credsDir string, replicas int, wantMsgs int32, ackWait time.Duration) (seqs []uint64, stored uint64, id string, appendErr error) {
	ctx := context.Background()
	nc := natstest.Connect(t, url, credsDir, natsauth.Admin)
	l, err := Open(ctx, nc, testSpec, Options{AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	other := natstest.Connect(t, url, credsDir, natsauth.Admin)
	js, _ := jetstream.New(other)
	var tries atomic.Int32
	var firstID atomic.Value
	sub, err := other.Subscribe("late.x", func(m *nats.Msg) {
		if tries.Add(1) != 1 {
			return
		}
		firstID.Store(m.Header.Get("Nats-Msg-Id"))
		if _, err := EnsureConfig(ctx, js, StreamSpec{Name: "LATE", Subjects: []string{"late.>"}, Replicas: replicas}.Config(), nil); err != nil {
			t.Error(err)
			return
		}
		// Store the copy, waiting (bounded) for the new stream's leader.
		err := Retry(ctx, nil, "store the copy", func(ctx context.Context) error {
			_, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
			return err
		})
		if err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	seqs, appendErr = l.Append(ctx, msg("late.x", 0))
	// The responder sees the resend asynchronously, maybe after the
	// stream's answer reached the append: wait for it (bounded).
	for deadline := time.Now().Add(5 * time.Second); tries.Load() < wantMsgs && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling observable state
	}
	_ = sub.Unsubscribe()
	// The first try, the copy it stored, and on a cluster a resend (or
	// more, on a slow machine).
	if got := tries.Load(); got < wantMsgs || (replicas == 1 && got != wantMsgs) {
		t.Fatalf("the silent responder saw %d messages, want %d", got, wantMsgs)
	}
	s, err := js.Stream(ctx, "LATE")
	if err != nil {
		t.Fatal(err)
	}
	id, _ = firstID.Load().(string)
	return seqs, s.CachedInfo().State.Msgs, id, appendErr
}

// A replica serves direct gets before it has caught up, so its "no such
// message" for an event just stored is not final. Here most members of the
// stream's direct-get queue group hold nothing: mirrors that answer direct
// gets for it (MirrorDirect) but copy none of its messages, as lagging
// replicas would (a server picks a member at random). At still reads the
// event every time, from the stream's leader when a mirror said "none", and
// calls ledger.ErrNotFound only what the leader does not hold.
func TestAtAsksTheLeaderWhenAReplicaHoldsNothing(t *testing.T) {
	ctx := context.Background()
	l := openTestLog(t, Options{})
	// A mirror joins the queue group once it has copied a message.
	if _, err := l.Append(ctx, msg("t.copied", 0)); err != nil {
		t.Fatal(err)
	}
	const laggards = 10
	for i := range laggards {
		_, err := l.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: fmt.Sprintf("LAGGARD_%d", i), Storage: jetstream.MemoryStorage, MirrorDirect: true,
			Mirror: &jetstream.StreamSource{Name: testSpec.Name, FilterSubject: "t.copied"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seqs, err := l.Append(ctx, msg("t.at", 0))
	if err != nil {
		t.Fatal(err)
	}
	// The premise: direct gets now often come back empty.
	var empty int
	for deadline := time.Now().Add(10 * time.Second); empty == 0 && time.Now().Before(deadline); {
		if _, err := l.Stream().GetMsg(ctx, seqs[0]); errors.Is(err, jetstream.ErrMsgNotFound) {
			empty++
		}
	}
	if empty == 0 {
		t.Fatal("no direct get came back empty: the mirrors do not answer them (the test's premise)")
	}
	for range 20 {
		got, err := l.At(ctx, seqs[0])
		if err != nil || got.GetSubject() != "t.at" {
			t.Fatalf("At(%d) with lagging replicas = %v, %v; want the stored event", seqs[0], got, err)
		}
	}
	if _, err := l.At(ctx, seqs[0]+5); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("At past the stream's end: %v, want ErrNotFound (the leader holds none)", err)
	}
}
