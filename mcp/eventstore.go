package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
)

// Response streams of stateful MCP sessions are kept in JetStream, so a
// client that lost its stream can resume it with Last-Event-ID from what
// was durably sent, not from one process's memory.
const (
	StreamsStream   = "PORTCULLIS_MCP_STREAMS"
	streamsSubjects = "pc.mcp.*.*"
	streamsMaxAge   = 24 * time.Hour // resumption is bounded; older streams are gone
	readWaitMax     = 5 * time.Second
)

// EventStore is an sdk.EventStore on a JetStream stream: one subject per
// (session, stream), named by digests so ids never reach subject syntax.
type EventStore struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

var _ sdk.EventStore = (*EventStore)(nil)

// StreamsConfig is the response streams' stream: file storage, 24h retention.
func StreamsConfig(replicas int) jetstream.StreamConfig {
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name: StreamsStream, Subjects: []string{streamsSubjects}, Storage: jetstream.FileStorage,
		Description: "Portcullis: MCP response streams of stateful sessions, for resumption with Last-Event-ID (JSON-RPC messages, kept for a bounded age)",
		Replicas:    replicas, MaxAge: streamsMaxAge, AllowDirect: true,
	}
}

// OpenEventStore ensures the stream (see StreamsConfig).
func OpenEventStore(ctx context.Context, js jetstream.JetStream, replicas int) (*EventStore, error) {
	s, err := ljs.EnsureConfig(ctx, js, StreamsConfig(replicas), nil)
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", StreamsStream, err)
	}
	return &EventStore{js: js, stream: s}, nil
}

func token(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func streamSubject(sessionID, streamID string) string {
	return "pc.mcp." + token(sessionID) + "." + token(streamID)
}

// Open needs nothing: a stream's subject exists with its first event.
func (e *EventStore) Open(context.Context, string, string) error { return nil }

// Append stores one outgoing event durably before it is sent.
func (e *EventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	if _, err := e.js.Publish(ctx, streamSubject(sessionID, streamID), data); err != nil {
		return fmt.Errorf("append mcp stream event: %w", err)
	}
	return nil
}

// After yields the stream's events after index (0-based), in order.
func (e *EventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		subj := streamSubject(sessionID, streamID)
		info, err := e.stream.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			yield(nil, err)
			return
		}
		total := int(info.State.Subjects[subj])
		switch {
		case index < -1 || index >= total:
			yield(nil, fmt.Errorf("mcp stream: no event %d (the stream holds %d): %w", index, total, sdk.ErrEventsPurged))
			return
		case index == total-1:
			return // nothing after it yet
		}
		rctx, cancel := context.WithTimeout(ctx, readWaitMax)
		defer cancel()
		c, err := e.stream.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
		if err != nil {
			yield(nil, err)
			return
		}
		seen := 0
		for seen < total {
			batch, err := c.Fetch(total-seen, jetstream.FetchMaxWait(readWaitMax))
			if err != nil {
				yield(nil, err)
				return
			}
			got := 0
			for m := range batch.Messages() {
				got++
				if seen > index {
					if !yield(m.Data(), nil) {
						return
					}
				}
				seen++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
				yield(nil, err)
				return
			}
			if got == 0 {
				yield(nil, fmt.Errorf("mcp stream: read %d of %d events", seen, total))
				return
			}
		}
	}
}

// SessionClosed keeps the events: retention (24h) reclaims them.
func (e *EventStore) SessionClosed(context.Context, string) error { return nil }
