package jetstream

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
)

// Source delivers one stream to a projector through an ordered consumer
// (ephemeral, flow-controlled, recreated by the client on gaps).
type Source struct {
	Stream jetstream.Stream
}

var _ projector.Source = Source{}

// Tail delivers events from sequence from on, in batches of up to
// projector.MaxFold: it blocks for the first event of a batch and then
// takes whatever has already arrived, so a quiet stream costs nothing and a
// busy one is folded in large batches.
func (s Source) Tail(ctx context.Context, from uint64, deliver func([]projector.Entry) error) error {
	if from == 0 {
		from = 1
	}
	cons, err := s.Stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   from,
	})
	if err != nil {
		return fmt.Errorf("tail: consumer: %w", err)
	}
	msgs := make(chan projector.Entry, projector.MaxFold*4)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		select {
		case msgs <- projector.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data(), Time: md.Timestamp}:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(projector.MaxFold*2))
	if err != nil {
		return fmt.Errorf("tail: consume: %w", err)
	}
	defer cc.Stop()
	batch := make([]projector.Entry, 0, projector.MaxFold)
	for {
		batch = batch[:0]
		select {
		case e := <-msgs:
			batch = append(batch, e)
		case <-ctx.Done():
			return ctx.Err()
		}
	drain:
		for len(batch) < projector.MaxFold {
			select {
			case e := <-msgs:
				batch = append(batch, e)
			default:
				break drain
			}
		}
		if err := deliver(batch); err != nil {
			return err
		}
	}
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
