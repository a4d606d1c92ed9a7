package jetstream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/projector"
)

// countingStream counts the ordered consumers a Source opens (how often
// it reads the stream instead of its feed) and those still consuming.
type countingStream struct {
	jetstream.Stream
	reads, active atomic.Int32
}

func (s *countingStream) OrderedConsumer(ctx context.Context, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	s.reads.Add(1)
	c, err := s.Stream.OrderedConsumer(ctx, cfg)
	return countingConsumer{c, s}, err
}

type countingConsumer struct {
	jetstream.Consumer
	s *countingStream
}

func (c countingConsumer) Consume(h jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	cc, err := c.Consumer.Consume(h, opts...)
	if err == nil {
		c.s.active.Add(1)
	}
	return countingConsume{cc, c.s}, err
}

type countingConsume struct {
	jetstream.ConsumeContext
	s *countingStream
}

func (c countingConsume) Stop() {
	c.s.active.Add(-1)
	c.ConsumeContext.Stop()
}

// tailed collects what a Source delivers.
type tailed struct {
	mu      sync.Mutex
	entries []projector.Entry
}

func (r *tailed) deliver(es []projector.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, es...)
	return nil
}

func (r *tailed) last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) == 0 {
		return 0
	}
	return r.entries[len(r.entries)-1].Seq
}

// startTail tails src from sequence 1 until the test ends.
func startTail(t *testing.T, src Source) *tailed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &tailed{}
	done := make(chan error, 1)
	go func() { done <- src.Tail(ctx, 1, r.deliver) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("tail ended with %v", err)
		}
	})
	return r
}

// waitTailed waits until r holds the stream's last sequence, then checks
// it holds every stored message exactly once, in order, with the stored
// bytes.
func waitTailed(t *testing.T, l *Log, r *tailed) {
	t.Helper()
	ctx := context.Background()
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); r.last() < last; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tail reached sequence %d of %d", r.last(), last)
		}
	}
	var stored []projector.Entry
	if err := (Source{Stream: l.Stream()}).ReadAll(ctx, func(e projector.Entry) error {
		stored = append(stored, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) != len(stored) {
		t.Fatalf("tail delivered %d entries, the stream holds %d", len(r.entries), len(stored))
	}
	for i, e := range r.entries {
		s := stored[i]
		if e.Seq != s.Seq || e.Subject != s.Subject || string(e.Data) != string(s.Data) {
			t.Fatalf("entry %d: tailed seq %d %s (%d bytes), stored seq %d %s (%d bytes)", i, e.Seq, e.Subject, len(e.Data), s.Seq, s.Subject, len(s.Data))
		}
	}
}

// A gateway's own writes reach its projector from the feed; what another
// writer appends (a second gateway, a forged message) is read from the
// stream, folded in its place, and reading stops again once the stream
// brings only the gateway's own writes.
func TestFeedFoldsOwnWritesAndReadsTheRest(t *testing.T) {
	ctx := context.Background()
	own, other, feed := twoWriters(t)
	stream := &countingStream{Stream: own.Stream()}
	r := startTail(t, Source{Stream: stream, Feed: feed})

	appendAll := func(l *Log, prefix string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.Append(ctx, msg(fmt.Sprintf("t.%s.%d", prefix, i), 0)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	// Alone: every write comes from the feed.
	appendAll(own, "own1", 200)
	waitTailed(t, own, r)
	if n := stream.reads.Load(); n != 0 {
		t.Fatalf("the source read the stream %d times while only its own gateway wrote", n)
	}
	if st := feed.Stats(); st != (FeedStats{Fed: 200}) {
		t.Fatalf("feed stats alone: %+v, want 200 fed, nothing read", st)
	}
	// Interleaved with another writer and a message no gateway wrote.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); appendAll(own, "own2", 200) }()
	go func() { defer wg.Done(); appendAll(other, "other", 100) }()
	wg.Wait()
	if _, err := own.nc.Request("t.forged", []byte("not an event"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitTailed(t, own, r)
	if stream.reads.Load() == 0 {
		t.Fatal("another writer's events were folded without reading the stream")
	}
	if st := feed.Stats(); st.Fed+st.Read != 501 || st.Read < 101 || st.Reads == 0 {
		t.Fatalf("feed stats with another writer: %+v, want 501 folded once each, at least the 101 foreign ones read", st)
	}
	// Alone again: after a quiet second the source stops reading.
	for deadline := time.Now().Add(10 * time.Second); stream.active.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the source still reads the stream long after the other writers stopped")
		}
	}
	reads := stream.reads.Load()
	appendAll(own, "own3", 200)
	waitTailed(t, own, r)
	if n := stream.reads.Load(); n != reads {
		t.Fatalf("the source read the stream %d more times after another writer stopped", n-reads)
	}
	if st := feed.Stats(); st.Fed+st.Read != 701 {
		t.Fatalf("feed stats alone again: %+v, want 701 folded once each", st)
	}
}

// An idle source still folds another writer's event: its next look at the
// stream finds it.
func TestFeedIdleSourceLooksAtTheStream(t *testing.T) {
	own, other, feed := twoWriters(t)
	r := startTail(t, Source{Stream: own.Stream(), Feed: feed})
	appendOne(t, own, "t.own.1")
	waitTailed(t, own, r)
	appendOne(t, other, "t.other.1")
	waitTailed(t, own, r)
}

// A wait for a sequence makes the source read the stream for it, without
// waiting for its next look (here: never).
func TestFeedWantReadsTheStream(t *testing.T) {
	own, other, feed := twoWriters(t)
	r := startTail(t, Source{Stream: own.Stream(), Feed: feed, pollEvery: time.Hour})
	appendOne(t, own, "t.own.1")
	waitTailed(t, own, r)
	feed.Want(appendOne(t, other, "t.other.1"))
	waitTailed(t, own, r)
}

// twoWriters opens one stream's log with a feed and a second writer's
// log without one.
func twoWriters(t *testing.T) (own, other *Log, feed *Feed) {
	t.Helper()
	ctx := context.Background()
	_, nc := natstest.Start(t)
	feed = NewFeed()
	own, err := Open(ctx, nc, testSpec, Options{Feed: feed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	if other, err = Open(ctx, nc, testSpec, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	return own, other, feed
}

func appendOne(t *testing.T, l *Log, subject string) uint64 {
	t.Helper()
	seqs, err := l.Append(context.Background(), msg(subject, 0))
	if err != nil {
		t.Fatal(err)
	}
	return seqs[0]
}

// The feed is a hint: writes it never brought (a full feed drops groups; an
// answer lost on the way) are read from the stream in their place.
func TestFeedWithHolesIsReadFromStream(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	l, err := Open(ctx, nc, testSpec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	feed := NewFeed()
	r := startTail(t, Source{Stream: l.Stream(), Feed: feed})
	for i := range 100 {
		m := msg(fmt.Sprintf("t.h.%d", i), 0)
		m.Data = mustMarshal(t, m.Event)
		seqs, err := l.Append(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			feed.offer([]projector.Entry{{Seq: seqs[0], Subject: m.Subject, Data: m.Data}})
		}
	}
	waitTailed(t, l, r)
}
