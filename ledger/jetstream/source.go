package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
)

// Source delivers one stream to a projector through an ordered consumer
// (ephemeral, flow-controlled, recreated by the client on gaps), or, with a
// Feed, from its own gateway's acknowledged writes and the stream only for
// what the feed lacks.
type Source struct {
	Stream jetstream.Stream
	// Feed, when set, brings this gateway's own writes (see Tail).
	Feed *Feed

	pollEvery time.Duration // 0: feedPollEvery (tests set it)
}

var _ projector.Source = Source{}

// How a Source with a Feed watches the stream.
const (
	// feedGapWait is how long the next sequence may be missing while the
	// stream is known to hold it (the feed has later ones, a look found it,
	// or someone waits for it) before the stream is read: acknowledgements
	// of one stream's writes can reach the feed slightly out of order, and
	// a write is stored before it is acknowledged.
	feedGapWait = 20 * time.Millisecond
	// feedPollEvery is how often an idle Source looks whether the stream
	// holds its next sequence, so another gateway's write reaches the views
	// unprompted.
	feedPollEvery = 200 * time.Millisecond
	// feedQuiet is how long reading the stream must bring nothing but this
	// gateway's own writes before the Source goes back to the feed alone.
	feedQuiet = time.Second
	// feedMatchWait is how long an event the stream delivered may wait for
	// the feed to name it as this gateway's own before it counts as another
	// writer's.
	feedMatchWait = 100 * time.Millisecond
)

// Tail delivers events from sequence from on, in batches of up to
// projector.MaxFold: it blocks for the first event of a batch and then
// takes whatever has already arrived, so a quiet stream costs nothing and a
// busy one is folded in large batches.
//
// With a Feed, this gateway's writes are folded from the feed, in stream
// order, and the stream is read (an ordered consumer) only from the first
// sequence the feed cannot bring: another writer's event, a write whose
// acknowledgement was lost, an entry the feed dropped. Reading goes on until
// the stream has for a while brought nothing but this gateway's writes. So
// a gateway that writes alone costs its stream no delivery per event, and
// every event is still folded exactly once, in order, with the same checks.
func (s Source) Tail(ctx context.Context, from uint64, deliver func([]projector.Entry) error) error {
	if from == 0 {
		from = 1
	}
	if s.Feed == nil {
		_, err := s.consume(ctx, from, deliver, nil)
		return err
	}
	t := &fedTail{src: s, next: from, pending: make(map[uint64]projector.Entry)}
	for {
		if err := t.fromFeed(ctx, deliver); err != nil {
			return err
		}
		s.Feed.reads.Add(1)
		next, err := s.consume(ctx, t.next, deliver, t)
		if err != nil {
			return err
		}
		t.next = next
	}
}

// delivered is one consumed message with what the consumer still holds after it.
type delivered struct {
	projector.Entry
	pending uint64
}

// consume reads the stream from sequence from with an ordered consumer
// and delivers it in batches. Without t it reads until ctx ends. With t it
// also takes t's feed and returns the next sequence to fold once t.caughtUp.
func (s Source) consume(ctx context.Context, from uint64, deliver func([]projector.Entry) error, t *fedTail) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := s.Stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   from,
	})
	if err != nil {
		return 0, fmt.Errorf("tail: consumer: %w", err)
	}
	msgs := make(chan delivered, projector.MaxFold*4)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		select {
		case msgs <- delivered{projector.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data(), Time: md.Timestamp}, md.NumPending}:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(projector.MaxFold*2))
	if err != nil {
		return 0, fmt.Errorf("tail: consume: %w", err)
	}
	defer func() {
		cancel() // first: a handler blocked on a full msgs returns
		cc.Stop()
	}()
	var feed <-chan []projector.Entry
	var tick <-chan time.Time
	if t != nil {
		feed = t.src.Feed.entries
		tk := time.NewTicker(feedMatchWait)
		defer tk.Stop()
		tick = tk.C
		now := time.Now()
		t.foreignAt, t.readAt, t.drained = now, now, false
	}
	batch := make([]projector.Entry, 0, projector.MaxFold)
	for {
		batch = batch[:0]
		var last delivered
		select {
		case d := <-msgs:
			batch, last = append(batch, d.Entry), d
		case es := <-feed:
			t.add(es)
			continue
		case <-tick:
			if t.caughtUp(time.Now()) {
				return t.next, nil
			}
			continue
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	drain:
		for len(batch) < projector.MaxFold {
			select {
			case d := <-msgs:
				batch, last = append(batch, d.Entry), d
			default:
				break drain
			}
		}
		if err := deliver(batch); err != nil {
			return 0, err
		}
		if t != nil {
			t.src.Feed.read.Add(uint64(len(batch)))
			t.read(batch, last.pending, time.Now())
		}
	}
}

// fedTail is a Source's state while it folds from its Feed.
type fedTail struct {
	src     Source
	next    uint64                     // the next sequence to fold
	pending map[uint64]projector.Entry // fed, not yet folded

	// While the stream is read:
	foreignAt time.Time            // when the stream last brought another writer's event
	unmatched map[uint64]time.Time // read from the stream, not (yet) named by the feed
	drained   bool                 // the consumer held nothing after the last batch
	readAt    time.Time            // when the stream last delivered
}

// add takes fed entries out of the feed and keeps those not yet folded;
// an entry already read from the stream is this gateway's own.
func (t *fedTail) add(es []projector.Entry) {
	t.src.Feed.took(es)
	for _, e := range es {
		if e.Seq < t.next {
			delete(t.unmatched, e.Seq)
			continue
		}
		if len(t.pending) < feedMax { // beyond: dropped, read from the stream in turn
			t.pending[e.Seq] = e
		}
	}
}

// fromFeed folds what the feed brings, in order, and returns (nil) when
// the stream must be read: a sequence the stream is known to hold has been
// missing for feedGapWait (the stream held it when the tail started, the
// feed has later ones, someone waits for it, or a look at the stream found
// it).
func (t *fedTail) fromFeed(ctx context.Context, deliver func([]projector.Entry) error) error {
	f := t.src.Feed
	last, err := t.src.LastSeq(ctx)
	if err != nil {
		return nil // read the stream (which reports its own failures)
	}
	stored := last // the stream is known to hold up to here (at the start, and what a look found)
	every := t.src.pollEvery
	if every == 0 {
		every = feedPollEvery
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	gap := time.NewTimer(feedGapWait)
	gap.Stop()
	defer gap.Stop()
	var missingSince time.Time
	for {
		if err := t.foldRun(deliver); err != nil {
			return err
		}
		if behind := len(t.pending) > 0 || f.want() >= t.next || stored >= t.next; !behind {
			missingSince = time.Time{}
		} else if missingSince.IsZero() {
			missingSince = time.Now()
			gap.Reset(feedGapWait)
		} else if time.Since(missingSince) >= feedGapWait {
			return nil
		}
		select {
		case es := <-f.entries:
			t.add(es)
		case <-f.wants:
		case <-poll.C:
			if t.src.holds(ctx, t.next) {
				stored = max(stored, t.next) // another writer's, or an unanswered write of ours
			}
		case <-gap.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holds reports whether the stream holds sequence seq: one direct get, far
// cheaper than the stream's info, which it asks only when the get fails.
func (s Source) holds(ctx context.Context, seq uint64) bool {
	_, err := s.Stream.GetMsg(ctx, seq)
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return err == nil
	}
	last, err := s.LastSeq(ctx)
	return err == nil && last >= seq
}

// foldRun delivers the fed entries that follow the last folded one.
func (t *fedTail) foldRun(deliver func([]projector.Entry) error) error {
	for {
	drain:
		for {
			select {
			case es := <-t.src.Feed.entries:
				t.add(es)
			default:
				break drain
			}
		}
		var batch []projector.Entry
		for len(batch) < projector.MaxFold {
			e, ok := t.pending[t.next]
			if !ok {
				break
			}
			delete(t.pending, t.next)
			batch = append(batch, e)
			t.next++
		}
		if len(batch) == 0 {
			return nil
		}
		if err := deliver(batch); err != nil {
			return err
		}
		t.src.Feed.fed.Add(uint64(len(batch)))
	}
}

// read notes a batch read from the stream and folded: its events the
// feed named are this gateway's, the others wait for the feed a while.
func (t *fedTail) read(batch []projector.Entry, left uint64, now time.Time) {
	if t.unmatched == nil {
		t.unmatched = make(map[uint64]time.Time)
	}
	for _, e := range batch {
		if _, own := t.pending[e.Seq]; own {
			delete(t.pending, e.Seq)
		} else {
			t.unmatched[e.Seq] = now
		}
	}
	t.next = batch[len(batch)-1].Seq + 1
	t.drained, t.readAt = left == 0, now
}

// caughtUp reports whether reading the stream may stop: the consumer has
// delivered all it held (or nothing for feedMatchWait), and for feedQuiet
// the stream brought only events the feed named.
func (t *fedTail) caughtUp(now time.Time) bool {
	for seq, at := range t.unmatched {
		if now.Sub(at) >= feedMatchWait {
			delete(t.unmatched, seq)
			t.foreignAt = now
		}
	}
	idle := now.Sub(t.readAt) >= feedMatchWait
	if !(t.drained || idle) || len(t.unmatched) > 0 || now.Sub(t.foreignAt) < feedQuiet {
		return false
	}
	for seq := range t.pending {
		if seq < t.next { // fed, and read in its place
			delete(t.pending, seq)
		}
	}
	return true
}

// LastSeq is the stream's last sequence now.
func (s Source) LastSeq(ctx context.Context) (uint64, error) {
	info, err := s.Stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// ReadAll delivers every event the stream holds now, in order, then
// returns (for offline checks such as the budget verifier).
func (s Source) ReadAll(ctx context.Context, deliver func(projector.Entry) error) error {
	last, err := s.LastSeq(ctx)
	if err != nil || last == 0 {
		return err
	}
	return s.ReadUpTo(ctx, last, deliver)
}

// ReadUpTo delivers every event up to sequence last, in order, then
// returns (for reading several streams as one consistent cut).
func (s Source) ReadUpTo(ctx context.Context, last uint64, deliver func(projector.Entry) error) error {
	if last == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := fmt.Errorf("done")
	err := s.Tail(ctx, 1, func(es []projector.Entry) error {
		for _, e := range es {
			if err := deliver(e); err != nil {
				return err
			}
			if e.Seq >= last {
				return done
			}
		}
		return nil
	})
	if err == done {
		return nil
	}
	return err
}
