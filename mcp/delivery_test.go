package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// blockingLedger holds every Transition until release is closed, and
// counts the calls, and those that started after closed was set.
type blockingLedger struct {
	started chan struct{}
	release chan struct{}
	closed  atomic.Bool
	late    atomic.Int32
	calls   atomic.Int32
	once    sync.Once
}

func (b *blockingLedger) Transition(ctx context.Context, _ ledger.Change) (*pb.Execution, error) {
	if b.closed.Load() {
		b.late.Add(1)
	}
	b.calls.Add(1)
	b.once.Do(func() { close(b.started) })
	<-b.release
	return &pb.Execution{}, nil
}

func (b *blockingLedger) Get(context.Context, string) (*pb.Execution, error) {
	return &pb.Execution{}, nil
}

// close waits for the DELIVERED append in flight, appends what is queued
// (a gateway stopped on purpose records the evidence it saw) and starts
// nothing after it returns: the gateway closes its ledger right after (a
// marker that ran on once panicked on the closed views).
func TestDeliveryCloseWaitsForTheMarker(t *testing.T) {
	l := &blockingLedger{started: make(chan struct{}), release: make(chan struct{})}
	d := newDelivery(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.linger = time.Hour // only close ends the gathering
	ids := []string{"act_01J4K8J7DX7V0000000000000A", "act_01J4K8J7DX7V0000000000000B", "act_01J4K8J7DX7V0000000000000C"}
	for range deliveredGather - 1 {
		d.mark(context.Background(), "agent-7", ids[:1], "acknowledged by the agent")
	}
	// A whole group: appended now.
	d.mark(context.Background(), "agent-7", ids[:1], "acknowledged by the agent")
	<-l.started // the marker is appending the first group
	d.mark(context.Background(), "agent-7", ids[1:], "acknowledged by the agent")

	done := make(chan struct{})
	go func() { d.close(); close(done) }()
	select {
	case <-done:
		t.Fatal("close returned while a DELIVERED append was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(l.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return once the appends ended")
	}
	l.closed.Store(true) // from here on no append may start
	if n := l.calls.Load(); n != deliveredGather+2 {
		t.Fatalf("%d DELIVERED appended by close, want %d (the group in flight and the two queued)", n, deliveredGather+2)
	}
	d.mark(context.Background(), "agent-7", ids[:1], "acknowledged by the agent") // after close: dropped
	time.Sleep(50 * time.Millisecond)
	if n := l.late.Load(); n != 0 {
		t.Fatalf("%d DELIVERED appends started after close", n)
	}
}

// answering is a blockingLedger that holds nothing.
func answering() *blockingLedger {
	l := &blockingLedger{started: make(chan struct{}), release: make(chan struct{})}
	close(l.release)
	return l
}

// Evidence lingers until deliveredGather are queued (or the oldest has
// waited the linger): one agent calling in a loop queues one a call, and
// each appended alone held the agent's next call for an fsync.
func TestDeliveryGathersAGroup(t *testing.T) {
	l := answering()
	d := newDelivery(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.linger = time.Hour
	groups := make(chan int, 8)
	d.onGroup = func(n int) { groups <- n }
	id := func(i int) string { return fmt.Sprintf("act_01J4K8J7DX7V00000000000%03d", i) }
	for i := range deliveredGather - 1 {
		d.mark(context.Background(), "agent-7", []string{id(i)}, "acknowledged by the agent")
	}
	time.Sleep(50 * time.Millisecond)
	if n := l.calls.Load(); n != 0 {
		t.Fatalf("%d DELIVERED appended before the group was full or had lingered", n)
	}
	d.mark(context.Background(), "agent-7", []string{id(deliveredGather)}, "acknowledged by the agent")
	select {
	case n := <-groups:
		if n != deliveredGather {
			t.Fatalf("first group of %d, want %d", n, deliveredGather)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a full group was not appended")
	}
	d.close()
	if n := l.calls.Load(); n != deliveredGather {
		t.Fatalf("%d DELIVERED appended, want %d", n, deliveredGather)
	}

	// A lone mark is appended once it has lingered.
	l2 := answering()
	d2 := newDelivery(l2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d2.linger = 10 * time.Millisecond
	d2.mark(context.Background(), "agent-7", []string{id(1)}, "acknowledged by the agent")
	for stop := time.Now().Add(5 * time.Second); l2.calls.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(stop) {
			t.Fatal("a lone mark was never appended")
		}
	}
	d2.close()
}

// A later request is evidence only if its bytes arrived after the
// response completed: one that arrived before (pipelined), or whose
// arrival is not known (HTTP/2), leaves the result awaiting.
func TestDeliveryEvidenceComparesArrival(t *testing.T) {
	l := answering()
	d := newDelivery(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.linger = time.Millisecond
	const id = "act_01J4K8J7DX7V0000000000000A"
	ctx := context.Background()
	d.begin("n1")
	d.carry("n1", id)
	done := time.Now()
	d.responded(ctx, "n1", "agent-7", []string{"c:1"}, nil, done, false)
	d.evidence(ctx, "agent-7", []string{"c:1"}, done.Add(-time.Millisecond)) // sent before it completed
	d.evidence(ctx, "agent-7", []string{"c:1"}, time.Time{})                 // arrival not known
	d.evidence(ctx, "agent-9", []string{"c:1"}, done.Add(time.Millisecond))  // another agent
	time.Sleep(50 * time.Millisecond)
	if n := l.calls.Load(); n != 0 {
		t.Fatalf("%d DELIVERED appended without evidence", n)
	}
	d.evidence(ctx, "agent-7", []string{"c:1"}, done.Add(time.Millisecond))
	for stop := time.Now().Add(5 * time.Second); l.calls.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(stop) {
			t.Fatal("a request that arrived after the response completed was no evidence")
		}
	}
	d.close()
}
