package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
)

// Response streams of stateful MCP sessions are kept in JetStream, so a
// client that lost its stream can resume it with Last-Event-ID from what
// was stored before it was sent, at whichever gateway it reconnects to
// (the request is forwarded to the session's owner).
//
// They are kept in memory, not on disk. A stored event serves one thing:
// resuming a stream of a session that is still alive in its gateway's
// memory. What would need them on disk, a restart of that gateway (or of
// the embedded server inside it), ends the session as well, so the events
// could never be resumed; a cluster keeps three copies in memory across a
// node's loss. The record of the call (its result included) is in the
// ledger, fsynced, and a retry of a call whose stream cannot be resumed
// gets the stored result. On disk, each event was one more fsync on the
// call's path (two on a 2025-11-25 call: the SSE priming event and the
// response), which halved such calls' rate at 64 clients
// (docs/performance.md, "Response streams in memory").
const (
	StreamsStream   = "PORTCULLIS_MCP_STREAMS"
	streamsSubjects = "pc.mcp.*.*"
	streamsMaxAge   = 24 * time.Hour // resumption is bounded; older streams are gone
	// streamsMaxBytes bounds the memory the stored events take (on each
	// replica); beyond it the oldest events go first, and a resumption of
	// a stream whose events went gets none (the retry gets the stored
	// result). About two minutes of 2 KiB responses at 1 000 calls/s.
	streamsMaxBytes = 256 << 20
	readWaitMax     = 5 * time.Second
)

// EventStore is an sdk.EventStore on a JetStream stream: one subject per
// (session, stream), named by digests so ids never reach subject syntax.
type EventStore struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

var _ sdk.EventStore = (*EventStore)(nil)

// StreamsConfig is the response streams' stream: memory storage, bounded
// by streamsMaxBytes, 24h retention; like every stream of the ledger it
// denies message delete and purge (its limits still drop old events).
func StreamsConfig(replicas int) jetstream.StreamConfig {
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name: StreamsStream, Subjects: []string{streamsSubjects}, Storage: jetstream.MemoryStorage,
		Description: "Portcullis: MCP response streams of stateful sessions, for resumption with Last-Event-ID (JSON-RPC messages, in memory, kept for a bounded age and size)",
		Replicas:    replicas, MaxAge: streamsMaxAge, MaxBytes: streamsMaxBytes, AllowDirect: true,
		DenyDelete: true, DenyPurge: true,
	}
}

// diskStreamsConfig is the stream as gateways before memory storage made
// it: a stream's storage cannot change in place, so a ledger that has one
// keeps it (see EnsureStreamsStream).
func diskStreamsConfig(replicas int) jetstream.StreamConfig {
	cfg := StreamsConfig(replicas)
	cfg.Storage, cfg.MaxBytes = jetstream.FileStorage, 0
	cfg.Description = "Portcullis: MCP response streams of stateful sessions, for resumption with Last-Event-ID (JSON-RPC messages, kept for a bounded age)"
	return cfg
}

// EnsureStreamsStream ensures the response streams' stream (StreamsConfig).
// One made on disk by an earlier version is kept on disk, with a warning
// saying how to move it to memory: its storage cannot be changed in place,
// and removing it would drop the streams that live sessions may resume.
// One made by an earlier version without deny delete/purge gets them by an
// update (a server may turn them on, never off); if that is refused (a
// user that may not change streams, a server that will not), the stream is
// kept as it is, with a warning saying how to fix it.
func EnsureStreamsStream(ctx context.Context, js jetstream.JetStream, replicas int, lg *slog.Logger) (jetstream.Stream, error) {
	cfg := StreamsConfig(replicas)
	var have *jetstream.StreamConfig
	if cur, err := js.Stream(ctx, StreamsStream); err == nil {
		have = &cur.CachedInfo().Config
		if have.Storage == jetstream.FileStorage {
			cfg = diskStreamsConfig(replicas)
			if lg != nil {
				lg.Warn("the MCP response streams are kept on disk, as an earlier version made them: every stored event is an fsync on its call's path; to keep them in memory, delete the stream as the NATS admin user while no session needs to resume, then start a gateway (or run `portcullis streams`)", "stream", StreamsStream)
			}
		}
	}
	s, err := ljs.EnsureConfig(ctx, js, cfg, lg)
	if err == nil || have == nil || have.DenyDelete && have.DenyPurge || ljs.Transient(err) || ctx.Err() != nil {
		return s, err
	}
	kept := cfg
	kept.DenyDelete, kept.DenyPurge = have.DenyDelete, have.DenyPurge
	s, kerr := ljs.EnsureConfig(ctx, js, kept, lg)
	if kerr != nil {
		return nil, err // it differs in more than the deny flags
	}
	if lg != nil {
		lg.Warn("the MCP response streams' stream allows message delete and purge, as an earlier version made it, and turning deny_delete and deny_purge on was refused; fix it as the NATS admin user: `portcullis streams --nats-url URL --nats-creds admin.nk`, or `nats stream edit "+StreamsStream+" --deny-delete --deny-purge`", "stream", StreamsStream, "err", err)
	}
	return s, nil
}

// OpenEventStore ensures the stream (see EnsureStreamsStream).
func OpenEventStore(ctx context.Context, js jetstream.JetStream, replicas int) (*EventStore, error) {
	s, err := EnsureStreamsStream(ctx, js, replicas, nil)
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
