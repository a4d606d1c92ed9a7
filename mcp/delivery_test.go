package mcp

import (
	"context"
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
// counts the calls that started after closed was set.
type blockingLedger struct {
	started chan struct{}
	release chan struct{}
	closed  atomic.Bool
	late    atomic.Int32
	once    sync.Once
}

func (b *blockingLedger) Transition(ctx context.Context, _ ledger.Change) (*pb.Execution, error) {
	if b.closed.Load() {
		b.late.Add(1)
	}
	b.once.Do(func() { close(b.started) })
	<-b.release
	return &pb.Execution{}, nil
}

func (b *blockingLedger) Get(context.Context, string) (*pb.Execution, error) {
	return &pb.Execution{}, nil
}

// close waits for the DELIVERED append in flight and starts none after
// it returns: the gateway closes its ledger right after (a marker that
// ran on once panicked on the closed views).
func TestDeliveryCloseWaitsForTheMarker(t *testing.T) {
	l := &blockingLedger{started: make(chan struct{}), release: make(chan struct{})}
	d := newDelivery(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ids := []string{"act_01J4K8J7DX7V0000000000000A", "act_01J4K8J7DX7V0000000000000B", "act_01J4K8J7DX7V0000000000000C"}
	d.mark(context.Background(), "agent-7", ids[:1], "acknowledged by the agent")
	<-l.started // the marker is appending the first one
	d.mark(context.Background(), "agent-7", ids[1:], "acknowledged by the agent")

	done := make(chan struct{})
	go func() { d.close(); close(done) }()
	select {
	case <-done:
		t.Fatal("close returned while a DELIVERED append was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	l.closed.Store(true) // from here on no append may start
	close(l.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return once the append in flight ended")
	}
	d.mark(context.Background(), "agent-7", ids[:1], "acknowledged by the agent") // after close: dropped
	time.Sleep(50 * time.Millisecond)
	if n := l.late.Load(); n != 0 {
		t.Fatalf("%d DELIVERED appends started after close", n)
	}
}
