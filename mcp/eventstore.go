package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
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
// It serves only events a gateway of this ledger wrote, each at the index
// it was written at (streammac.go).
type EventStore struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	key    []byte // StreamsKey of the ledger's fingerprint key
	log    *slog.Logger

	mu sync.Mutex
	// next is the index of each open stream's next event (session →
	// stream → index), counted here because the SDK does not pass it;
	// at most maxOpenStreams entries (open counts them).
	next     map[string]map[string]int
	open     int
	reported map[uint64]bool // stored sequences already reported as rejected
	reportQ  []uint64        // the same, oldest first (at most maxReported)
	onReject func(reason string)
	rejected atomic.Uint64
}

var _ sdk.EventStore = (*EventStore)(nil)

const (
	// maxOpenStreams bounds the streams whose next index is counted in
	// memory (about 100 bytes each). A stream forgotten beyond it (the
	// one dropped is arbitrary) finds its index again from what it
	// stored, at its next append (nextIndex).
	maxOpenStreams = 1 << 16
	// maxStreamScan bounds the stored messages read for one stream on a
	// resumption; a subject holding more (a genuine stream holds a
	// response and its notifications: a few) cannot be resumed, and the
	// call's retry gets its stored result.
	maxStreamScan = 1 << 14
	// maxReported bounds the rejected messages remembered, so that one
	// read again (every resumption reads the whole stream, and a
	// resumption reads it twice: delivery evidence, then the replay) is
	// logged and counted once.
	maxReported = 4096
)

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
		DenyDelete: true, DenyPurge: true, ConsumerLimits: ljs.ConsumerLimits(),
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

// OpenEventStore ensures the stream (see EnsureStreamsStream). Events are
// authenticated under streamsKey (StreamsKey of the fingerprint key);
// rejected ones are logged to lg.
func OpenEventStore(ctx context.Context, js jetstream.JetStream, replicas int, streamsKey []byte, lg *slog.Logger) (*EventStore, error) {
	if len(streamsKey) < sha256.Size {
		return nil, fmt.Errorf("mcp streams key of %d bytes, want %d", len(streamsKey), sha256.Size)
	}
	s, err := EnsureStreamsStream(ctx, js, replicas, nil)
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", StreamsStream, err)
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &EventStore{js: js, stream: s, key: streamsKey, log: lg, next: map[string]map[string]int{}, reported: map[uint64]bool{}}, nil
}

// OnReject hears each stored message that was not served, once, with its
// reason (RejectMAC, RejectPosition): for the quarantine metric.
func (e *EventStore) OnReject(f func(reason string)) {
	e.mu.Lock()
	e.onReject = f
	e.mu.Unlock()
}

// Rejected counts the stored messages this store refused to serve since
// it started.
func (e *EventStore) Rejected() uint64 { return e.rejected.Load() }

func token(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func streamSubject(sessionID, streamID string) string {
	return "pc.mcp." + token(sessionID) + "." + token(streamID)
}

// Open starts counting a new stream's events at index 0 (the SDK opens
// each stream, the session's standalone one included, before it appends
// to it; stream ids are random, so its subject is empty).
func (e *EventStore) Open(_ context.Context, sessionID, streamID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setNextLocked(sessionID, streamID, 0)
	return nil
}

func (e *EventStore) setNextLocked(sessionID, streamID string, index int) {
	streams := e.next[sessionID]
	if streams == nil {
		streams = map[string]int{}
		e.next[sessionID] = streams
	}
	if _, ok := streams[streamID]; !ok {
		if e.open >= maxOpenStreams {
			e.forgetOneLocked()
		}
		e.open++
	}
	streams[streamID] = index
}

// forgetOneLocked drops one counted stream; should it append again, its
// index is read back from JetStream (nextIndex).
func (e *EventStore) forgetOneLocked() {
	for sid, streams := range e.next {
		for id := range streams {
			delete(streams, id)
			e.open--
			break
		}
		if len(streams) == 0 {
			delete(e.next, sid)
		}
		return
	}
}

// Append stores one outgoing event, with its index and MAC, before it is
// sent. The SDK appends to one stream at a time (under the stream's lock),
// and only the gateway that holds the session appends to its streams.
func (e *EventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	index, err := e.nextIndex(ctx, sessionID, streamID)
	if err != nil {
		return fmt.Errorf("append mcp stream event: %w", err)
	}
	subj := streamSubject(sessionID, streamID)
	if _, err := e.js.PublishMsg(ctx, sealEvent(e.key, subj, sessionID, streamID, index, data)); err != nil {
		return fmt.Errorf("append mcp stream event: %w", err)
	}
	return nil
}

// nextIndex takes the index of a stream's next event. It counts an
// append that then fails: the SDK gives that event its index anyway (its
// event id), and the next event has the one after it; a resumption past
// the missing event finds the gap and refuses, as the SDK requires.
func (e *EventStore) nextIndex(ctx context.Context, sessionID, streamID string) (int, error) {
	e.mu.Lock()
	index, ok := e.next[sessionID][streamID]
	if ok {
		e.setNextLocked(sessionID, streamID, index+1)
		e.mu.Unlock()
		return index, nil
	}
	e.mu.Unlock()
	// Forgotten (maxOpenStreams): the stream's last verified event says
	// where it is.
	events, err := e.verified(ctx, sessionID, streamID)
	if err != nil {
		return 0, err
	}
	if len(events) > 0 {
		index = events[len(events)-1].index + 1
	}
	e.mu.Lock()
	e.setNextLocked(sessionID, streamID, index+1)
	e.mu.Unlock()
	return index, nil
}

// storedEvent is one verified event of a stream.
type storedEvent struct {
	index int
	data  []byte
}

// After yields the stream's events after index (0-based), in order: only
// verified events, by the index each carries, so a message no gateway of
// the ledger wrote neither reaches the client nor shifts what it gets. An
// index the stream never reached, or events after it that are gone
// (dropped by the stream's limits, or an append that failed), is
// sdk.ErrEventsPurged before anything is yielded.
func (e *EventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		events, err := e.verified(ctx, sessionID, streamID)
		if err != nil {
			yield(nil, err)
			return
		}
		last := -1
		if len(events) > 0 {
			last = events[len(events)-1].index
		}
		if index < -1 || index > last {
			yield(nil, fmt.Errorf("mcp stream: no event %d (the last is %d): %w", index, last, sdk.ErrEventsPurged))
			return
		}
		from := len(events)
		for i, ev := range events {
			if ev.index > index {
				from = i
				break
			}
		}
		for k, ev := range events[from:] {
			if ev.index != index+1+k {
				yield(nil, fmt.Errorf("mcp stream: event %d is gone: %w", index+1+k, sdk.ErrEventsPurged))
				return
			}
		}
		for _, ev := range events[from:] {
			if !yield(ev.data, nil) {
				return
			}
		}
	}
}

// verified reads a stream's stored messages and keeps those that carry a
// valid MAC for this session, stream and their index, each past the last
// one kept (strictly increasing indexes: a copy of a genuine event
// stored after it repeats an index). The rest are reported and skipped.
func (e *EventStore) verified(ctx context.Context, sessionID, streamID string) ([]storedEvent, error) {
	subj := streamSubject(sessionID, streamID)
	info, err := e.stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return nil, err
	}
	total := int(info.State.Subjects[subj])
	if total == 0 {
		return nil, nil
	}
	if total > maxStreamScan {
		return nil, fmt.Errorf("mcp stream: %d stored messages, more than the %d read: %w", total, maxStreamScan, sdk.ErrEventsPurged)
	}
	rctx, cancel := context.WithTimeout(ctx, readWaitMax)
	defer cancel()
	c, err := e.stream.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, err
	}
	var events []storedEvent
	seen := 0
	for seen < total {
		batch, err := c.Fetch(total-seen, jetstream.FetchMaxWait(readWaitMax))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			seen++
			index, err := openEvent(e.key, sessionID, streamID, m.Headers(), m.Data())
			switch {
			case err != nil:
				e.reject(m, subj, RejectMAC, -1)
			case len(events) > 0 && index <= events[len(events)-1].index:
				e.reject(m, subj, RejectPosition, index)
			default:
				events = append(events, storedEvent{index: index, data: m.Data()})
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if got == 0 {
			return nil, fmt.Errorf("mcp stream: read %d of %d events", seen, total)
		}
	}
	return events, nil
}

// reject logs and counts a stored message that is not served, once per
// stored message (maxReported).
func (e *EventStore) reject(m jetstream.Msg, subject, reason string, index int) {
	var seq uint64
	if md, err := m.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	e.mu.Lock()
	if e.reported[seq] {
		e.mu.Unlock()
		return
	}
	e.reported[seq] = true
	e.reportQ = append(e.reportQ, seq)
	if len(e.reportQ) > maxReported {
		delete(e.reported, e.reportQ[0])
		e.reportQ = e.reportQ[1:]
	}
	f := e.onReject
	e.mu.Unlock()
	e.rejected.Add(1)
	if f != nil {
		f(reason)
	}
	why := "no valid MAC under the ledger's streams key: not written by a gateway of this ledger (or stored before events carried one)"
	if reason == RejectPosition {
		why = "a genuine event stored again after its place (a replay)"
	}
	e.log.Warn("a stored MCP response-stream event was not served: "+why, "stream", StreamsStream, "subject", subject, "seq", seq, "reason", reason, "index", index)
}

// SessionClosed stops counting the session's streams; retention (24h)
// reclaims their events.
func (e *EventStore) SessionClosed(_ context.Context, sessionID string) error {
	e.mu.Lock()
	e.open -= len(e.next[sessionID])
	delete(e.next, sessionID)
	e.mu.Unlock()
	return nil
}
