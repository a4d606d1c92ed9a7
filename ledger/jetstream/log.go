package jetstream

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// Log is a ledger.Log on one JetStream stream.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	c      *committer
	keys   ledger.Keys
}

var _ ledger.Log = (*Log)(nil)

// Options tune a Log. Zero values pick the defaults.
type Options struct {
	// InflightBatches is how many atomic batches may await their
	// acknowledgement at once (default 8, at most 32; the server allows 50
	// per stream).
	InflightBatches int
	// MaxBatch is the most messages in one atomic batch (default and
	// maximum 1000, the server's limit).
	MaxBatch int
	// AckWait bounds the wait for one append's acknowledgement (default
	// AckWaitMax, which covers one leader election).
	AckWait time.Duration
	Logger  *slog.Logger
	// OnCommit, when set, hears every publish the committer makes (one
	// atomic batch or one plain publish): its messages and how long the
	// acknowledgement took. Metrics hang here; it must not block.
	OnCommit func(messages int, took time.Duration)
	// Keys checks the writer of every event Last reads (nil: hash only).
	Keys ledger.Keys
	// GroupSignKey, when set, signs the events appended without a
	// signature once per commit group (ledger.SignGroup): one Ed25519
	// signature over the group's Merkle root instead of one per event.
	GroupSignKey ed25519.PrivateKey
	// GroupSigner, when set, signs the commit groups instead of a signer of
	// this log's own with GroupSignKey: several logs sharing one (a sharded
	// ledger's lanes) share signatures between groups made at once.
	GroupSigner *GroupSigner
	// Feed, when set, hears every acknowledged commit group, so the
	// stream's projector can fold this gateway's writes without reading
	// them back (Source.Feed).
	Feed *Feed
}

// Open ensures the stream and starts the group committer. Close stops it.
func Open(ctx context.Context, nc *nats.Conn, spec StreamSpec, opt Options) (*Log, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s, err := EnsureConfig(ctx, js, spec.Config(), opt.Logger)
	if err != nil {
		return nil, err
	}
	l := &Log{nc: nc, js: js, stream: s, name: spec.Name, keys: opt.Keys}
	l.c = newCommitter(nc, opt)
	return l, nil
}

// Close stops the committer; appends waiting in its queue fail.
func (l *Log) Close() { l.c.close() }

// Stream is the underlying JetStream stream (for the projector's source).
func (l *Log) Stream() jetstream.Stream { return l.stream }

// Append marshals the decision and hands it to the group committer.
func (l *Log) Append(ctx context.Context, msgs ...ledger.Message) ([]uint64, error) {
	if len(msgs) == 0 || len(msgs) > l.c.maxBatch {
		return nil, fmt.Errorf("append: a decision has 1 to %d messages, got %d", l.c.maxBatch, len(msgs))
	}
	d := &decision{msgs: make([]outMsg, len(msgs)), done: make(chan struct{}), ctx: ctx}
	for i, m := range msgs {
		data := m.Data
		if data == nil {
			var err error
			if data, err = proto.Marshal(m.Event); err != nil {
				return nil, fmt.Errorf("append %s: marshal: %w", m.Subject, err)
			}
		}
		if len(data) > MaxMsgBytes-1024 {
			return nil, fmt.Errorf("append %s: event of %d bytes exceeds the %d-byte limit", m.Subject, len(data), MaxMsgBytes-1024)
		}
		if m.Follows && (i == 0 || msgs[i-1].Subject != m.Subject) {
			return nil, fmt.Errorf("append %s: a following message must come right after one on its subject", m.Subject)
		}
		d.msgs[i] = outMsg{subject: m.Subject, check: m.CheckSubject, expected: m.ExpectedSeq, follows: m.Follows, data: data}
		if l.c.signer != nil && len(m.Event.GetSignature()) == 0 {
			d.msgs[i].unsigned = m.Event.GetHash()
		}
	}
	return l.c.submit(ctx, d)
}

// Last reads the subject's latest event with a direct get and checks it
// (hash, subject, an enrolled writer's signature). When the latest stored
// message fails, it is not served: Last returns the latest valid event on
// the subject with the subject's real last sequence, so a compare-and-set
// built on it expects what the stream holds.
func (l *Log) Last(ctx context.Context, subject string) (ledger.Head, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ledger.Head{}, ledger.ErrNotFound
	}
	if err != nil {
		return ledger.Head{}, fmt.Errorf("last %s: %w", subject, err)
	}
	ev, err := l.check(subject, m.Data)
	if err == nil {
		return ledger.Head{Seq: m.Sequence, Event: ev}, nil
	}
	if errors.Is(err, ledger.ErrKeysUnavailable) {
		return ledger.Head{}, fmt.Errorf("last %s: %w", subject, err)
	}
	l.c.log.Warn("latest message on subject quarantined; reading the latest valid one", "subject", subject, "seq", m.Sequence, "reason", err)
	valid, err := l.lastValid(ctx, subject, m.Sequence)
	if err != nil {
		return ledger.Head{}, err
	}
	if valid == nil {
		return ledger.Head{Seq: m.Sequence}, fmt.Errorf("last %s: %w: no valid event (the subject holds only quarantined messages up to %d)", subject, ledger.ErrNotFound, m.Sequence)
	}
	return ledger.Head{Seq: m.Sequence, Event: valid}, nil
}

// At reads the event stored at seq and verifies it for serving, as Last
// does (decoded, its subject and its writer's signature checked). It asks
// any replica first (a direct get, served where the caller is); a
// replica's "no such message" is asked again of the stream's leader, since
// a replica serves direct gets before it has caught up, and only the
// leader's answer makes it ledger.ErrNotFound. Without a leader (an
// election) that is an error, not "not found".
func (l *Log) At(ctx context.Context, seq uint64) (*pb.Event, error) {
	var subject string
	var data []byte
	m, err := l.stream.GetMsg(ctx, seq)
	switch {
	case err == nil:
		subject, data = m.Subject, m.Data
	case errors.Is(err, jetstream.ErrMsgNotFound):
		lm, err := LeaderMsg(ctx, l.nc, l.name, seq, "")
		if err != nil {
			return nil, fmt.Errorf("%s seq %d: a replica holds none; asking the leader: %w", l.name, seq, err)
		}
		if lm == nil {
			return nil, fmt.Errorf("%s seq %d: %w", l.name, seq, ledger.ErrNotFound)
		}
		subject, data = lm.Subject, lm.Data
	default:
		return nil, fmt.Errorf("%s seq %d: %w", l.name, seq, err)
	}
	ev, err := l.check(subject, data)
	if err != nil {
		return nil, fmt.Errorf("%s seq %d: %w", l.name, seq, err)
	}
	return ev, nil
}

// maxScanBack bounds how many messages of one subject lastValid reads.
const maxScanBack = 1 << 16

// lastValid reads the subject from its start up to seq and returns its
// latest valid event (nil: none), for the rare read whose latest message
// was quarantined.
func (l *Log) lastValid(ctx context.Context, subject string, upTo uint64) (*pb.Event, error) {
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, fmt.Errorf("last %s: scan: %w", subject, err)
	}
	var valid *pb.Event
	for n := 0; n < maxScanBack; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("last %s: scan: %w", subject, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("last %s: scan: %w", subject, err)
			}
			if md.Sequence.Stream > upTo {
				return valid, nil
			}
			ev, err := l.check(subject, m.Data())
			if errors.Is(err, ledger.ErrKeysUnavailable) {
				return nil, fmt.Errorf("last %s: %w", subject, err)
			}
			if err == nil && (valid == nil || bytesEqual(ev.GetPrevHash(), valid.GetHash())) {
				valid = ev
			}
			if md.Sequence.Stream == upTo {
				return valid, nil
			}
		}
		if got == 0 {
			return valid, nil
		}
	}
	return nil, fmt.Errorf("last %s: more than %d messages to scan", subject, maxScanBack)
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// check decodes a stored message and verifies it for serving.
func (l *Log) check(subject string, data []byte) (*pb.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ledger.ErrCorrupt, err)
	}
	if ev.GetSubject() != subject {
		return nil, fmt.Errorf("%w: the event names subject %s", ledger.ErrCorrupt, ev.GetSubject())
	}
	if err := ledger.CheckSignedData(ev, data, l.keys); err != nil {
		return nil, err
	}
	return ev, nil
}

// LastSeq is the stream's last sequence now.
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	return Source{Stream: l.stream}.LastSeq(ctx)
}

// Decode parses a stored event and checks its hash.
func Decode(data []byte) (*pb.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ledger.ErrCorrupt, err)
	}
	if err := ledger.CheckHash(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// knownSeqs remembers the last sequence this Log saw land per subject, so a
// decision that expects an older sequence fails at once instead of failing
// a whole batch at the server. Only "definitely moved" is concluded from it.
type knownSeqs struct {
	mu sync.Mutex
	m  map[string]uint64
}

const knownSeqsMax = 1 << 17

func (k *knownSeqs) moved(subject string, expected uint64) (uint64, bool) {
	k.mu.Lock()
	seq, ok := k.m[subject]
	k.mu.Unlock()
	return seq, ok && seq > expected
}

func (k *knownSeqs) landed(subject string, seq uint64) {
	k.mu.Lock()
	if len(k.m) >= knownSeqsMax {
		clear(k.m)
	}
	if seq > k.m[subject] {
		k.m[subject] = seq
	}
	k.mu.Unlock()
}
