// Package projector folds the ledger's streams into views. It owns the fold
// (which event changes which row) and the runner (bounded fetch → fold →
// one write batch that also records the last applied stream sequence), not
// the storage: projector/pebble implements Store.
//
// It imports no NATS and no Pebble; the stream arrives through Source.
package projector

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"google.golang.org/protobuf/types/known/timestamppb"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// MaxFold bounds how many events go into one write batch.
const MaxFold = 1024

// Entry is one stored event as the stream delivers it.
type Entry struct {
	Seq     uint64
	Subject string
	Data    []byte
	Time    time.Time // when the stream stored it (zero when it came from the writer's own feed)
}

// Source delivers a stream's events in order.
type Source interface {
	// Tail calls deliver with batches of at most MaxFold entries, in stream
	// order, starting at sequence from, until ctx ends or deliver fails.
	Tail(ctx context.Context, from uint64, deliver func([]Entry) error) error
	// LastSeq is the stream's last sequence now.
	LastSeq(ctx context.Context) (uint64, error)
}

// Row is one view row the fold writes: an execution subject's new head.
type Row struct {
	Subject string
	Seq     uint64
	Data    []byte // the stored event, as appended
	Event   *pb.Event
	// Accepted marks the execution's first event: the intent's latest
	// execution is the one accepted last.
	Accepted bool
	// Replaced is the head the store held for Subject before this batch
	// (nil when none), so the store can drop index rows it keyed on it.
	Replaced *pb.Event
}

// Intent is the view row of one intent: the sequence of its latest event
// and the subject of its latest execution.
type Intent struct {
	Seq           uint64
	LatestSubject string
}

// Mark is how far the views hold a stream: the last applied sequence and
// the running digest over every stored event up to it (see Chain). The
// sealer signs marks into checkpoints; a verifier recomputes them.
type Mark struct {
	Seq    uint64
	Digest []byte
}

// Chain extends a running digest by one stored event:
// sha256(prev || seq || sha256(data)); the digest before the first event
// is 32 zero bytes.
func Chain(prev []byte, seq uint64, data []byte) []byte {
	var zero [sha256.Size]byte
	if prev == nil {
		prev = zero[:]
	}
	h := sha256.Sum256(data)
	var buf [2*sha256.Size + 8]byte // fits when prev is a digest
	msg := binary.BigEndian.AppendUint64(append(buf[:0], prev...), seq)
	sum := sha256.Sum256(append(msg, h[:]...))
	return sum[:]
}

// Store is the views' write side.
type Store interface {
	// Checkpoint is the last stream sequence whose rows are written.
	Checkpoint(stream string) (uint64, error)
	// Mark is the checkpoint with its running digest.
	Mark(stream string) (Mark, error)
	// Write stores heads, intents, quarantined messages and the new mark in
	// one atomic batch. The heads' events become the store's: the caller
	// must not use or change them afterwards.
	Write(stream string, heads []Row, intents map[string]Intent, quarantined []*pb.Quarantined, mark Mark) error
	// Head returns the head the views hold for subject. Its event may be
	// shared: the caller must not change it.
	Head(ctx context.Context, subject string) (ledger.Head, error)
	// IntentRow returns the intent row (ErrNotFound when none).
	IntentRow(token string) (Intent, error)
}

// Projector folds one stream into its views.
type Projector struct {
	stream     string
	src        Source
	checkpoint func(stream string) (uint64, error)
	mark       func(stream string) (Mark, error)
	apply      func(ctx context.Context, entries []Entry, mark Mark) error
	log        *slog.Logger

	digest []byte // running digest as of the last applied entry
	loaded bool

	guard *guard
	x     *executions
}

// guard is what a projector checks every event against, and its count of
// quarantined messages.
type guard struct {
	keys        ledger.Keys
	quarantined atomic.Uint64
	now         func() time.Time
	// onQuarantine hears every quarantined message (a metric); nil: none.
	onQuarantine func(stream string, reason error)
	// folded: why each of the batch's quarantined messages was, counted
	// once the views hold them (a batch that fails to write is folded again).
	folded []error
}

func (g *guard) quarantine(stream string, e Entry, ev *pb.Event, reason error) *pb.Quarantined {
	g.folded = append(g.folded, reason)
	now := g.now()
	return &pb.Quarantined{Stream: stream, Seq: e.Seq, Subject: e.Subject, Reason: reason.Error(),
		TimeUnixNano: now.UnixNano(), QuarantinedAt: timestamppb.New(now), GatewayId: ev.GetGatewayId()}
}

// SetKeys makes the projector check every event's signature against the
// enrolled keys (without keys it checks hashes, chains and transitions).
// Call it before Run.
func (p *Projector) SetKeys(keys ledger.Keys) { p.guard.keys = keys }

// OnQuarantine makes fn hear every message this projector quarantines
// (for a metric; it must not block). Call it before Run.
func (p *Projector) OnQuarantine(fn func(stream string, reason error)) { p.guard.onQuarantine = fn }

// SetLane makes this the projector of lane k of a ledger of n lanes (the
// default: lane 0 of one). An event on a subject that is not where the
// ledger puts it (another lane's intent) is quarantined and moves no
// intent row: the owning lane's sequences are the only ones an intent
// keeps. Call it before Run.
func (p *Projector) SetLane(k int, n ledger.Lanes) { p.x.lane, p.x.lanes = k, n }

// Quarantined counts the messages this projector refused to fold since it
// started (an operator metric; the quarantine view holds each one).
func (p *Projector) Quarantined() uint64 { return p.guard.quarantined.Load() }

// New returns a Projector of the executions stream from src into store.
func New(stream string, src Source, store Store, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{now: time.Now}
	x := &executions{stream: stream, store: store, guard: g, log: log}
	return &Projector{stream: stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: x.apply, log: log, guard: g, x: x}
}

// Apply folds one ordered batch of entries and writes it with its mark.
func (p *Projector) Apply(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if !p.loaded {
		m, err := p.mark(p.stream)
		if err != nil {
			return err
		}
		p.digest, p.loaded = m.Digest, true
	}
	d := p.digest
	for _, e := range entries {
		d = Chain(d, e.Seq, e.Data)
	}
	err := p.apply(ctx, entries, Mark{Seq: entries[len(entries)-1].Seq, Digest: d})
	p.guard.written(p.stream, err == nil)
	if err != nil {
		p.loaded = false // reload from the store: it holds what was written
		return err
	}
	p.digest = d
	return nil
}

// written counts the batch's quarantined messages of stream once the
// quarantine view holds them (ok), or forgets them when the batch was not
// written.
func (g *guard) written(stream string, ok bool) {
	if ok {
		for _, reason := range g.folded {
			if g.onQuarantine != nil {
				g.onQuarantine(stream, reason)
			}
		}
		g.quarantined.Add(uint64(len(g.folded))) // after the metric: a count seen is a count reported
	}
	g.folded = g.folded[:0]
}

// executions folds the executions stream.
type executions struct {
	stream string
	store  Store
	guard  *guard
	log    *slog.Logger
	lane   int
	lanes  ledger.Lanes
}

// Run folds from the checkpoint on until ctx ends. An event that fails its
// checks (undecodable, unenrolled writer, bad signature, broken chain,
// illegal transition) is quarantined and the fold goes on: views never
// hold a state the log does not prove, and no message can stop them. A
// storage error stops it; restarting replays from the checkpoint.
func (p *Projector) Run(ctx context.Context) error {
	cp, err := p.checkpoint(p.stream)
	if err != nil {
		return fmt.Errorf("projector %s: checkpoint: %w", p.stream, err)
	}
	err = p.src.Tail(ctx, cp+1, func(entries []Entry) error { return p.Apply(ctx, entries) })
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

func (p *executions) apply(ctx context.Context, entries []Entry, mark Mark) error {
	rows := make([]Row, 0, len(entries))
	pending := make(map[string]int, len(entries)) // subject → index in rows
	intents := make(map[string]Intent)
	var quarantined []*pb.Quarantined
	head := func(subject string) (*Row, error) {
		if i, ok := pending[subject]; ok {
			return &rows[i], nil
		}
		h, err := p.store.Head(ctx, subject)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		// Replaced: a row built from it (a quarantined event keeps the head)
		// replaces what the views hold, the same event.
		return &Row{Subject: subject, Seq: h.Seq, Event: h.Event, Replaced: h.Event}, nil
	}
	intent := func(token string) (Intent, error) {
		if in, ok := intents[token]; ok {
			return in, nil
		}
		in, err := p.store.IntentRow(token)
		if errors.Is(err, ledger.ErrNotFound) {
			err = nil
		}
		return in, err
	}
	put := func(r Row) {
		if i, ok := pending[r.Subject]; ok {
			r.Accepted = r.Accepted || rows[i].Accepted
			r.Replaced = rows[i].Replaced // what the views held before this batch
			rows[i] = r
			return
		}
		pending[r.Subject] = len(rows)
		rows = append(rows, r)
	}
	for _, e := range entries {
		prevRow, err := head(e.Subject)
		if err != nil {
			return fmt.Errorf("projector %s seq %d: %w", p.stream, e.Seq, err)
		}
		var prev *pb.Event
		if prevRow != nil {
			prev = prevRow.Event
		}
		ev, fault := checkEntry(e, prev, p.guard.keys)
		if errors.Is(fault, ledger.ErrKeysUnavailable) {
			return fmt.Errorf("projector %s seq %d: %w", p.stream, e.Seq, fault) // retried, never quarantined
		}
		token, tokOK := intentToken(e.Subject)
		if fault == nil && !p.owns(e.Subject) {
			fault = fmt.Errorf("%w: %s is not in lane %d of %d (an intent lives in one lane)", ledger.ErrCorrupt, e.Subject, p.lane, p.lanes.Count())
		}
		tokOK = tokOK && p.ownsToken(e.Subject, token)
		if fault != nil {
			// Quarantined: never folded. The subject's (and its intent's)
			// last sequence still moves, so a decision on it keeps the
			// latest valid event and expects the real sequence.
			quarantined = append(quarantined, p.guard.quarantine(p.stream, e, ev, fault))
			p.log.Warn("event quarantined", "stream", p.stream, "seq", e.Seq, "subject", e.Subject, "reason", fault)
			if prevRow != nil {
				r := *prevRow
				if r.Data == nil {
					if r.Data, err = proto.Marshal(r.Event); err != nil {
						return fmt.Errorf("projector %s seq %d: %w", p.stream, e.Seq, err)
					}
				}
				r.Seq = e.Seq
				put(r)
			}
			if tokOK {
				in, err := intent(token)
				if err != nil {
					return fmt.Errorf("projector %s seq %d: %w", p.stream, e.Seq, err)
				}
				in.Seq = e.Seq
				intents[token] = in
			}
			continue
		}
		put(Row{Subject: e.Subject, Seq: e.Seq, Data: e.Data, Event: ev, Accepted: prev == nil, Replaced: prev})
		if !tokOK {
			continue // a read-only execution outside lane 0: no intent row
		}
		if prev == nil {
			// A new execution: the intent's row is this event's whole, so
			// the row the views hold need not be read.
			intents[token] = Intent{Seq: e.Seq, LatestSubject: e.Subject}
			continue
		}
		in, err := intent(token)
		if err != nil {
			return fmt.Errorf("projector %s seq %d: %w", p.stream, e.Seq, err)
		}
		in.Seq = e.Seq
		intents[token] = in
	}
	if err := p.store.Write(p.stream, rows, intents, quarantined, mark); err != nil {
		return fmt.Errorf("projector %s: write views: %w", p.stream, err)
	}
	return nil
}

// checkEntry decodes a stored message and checks it may follow prev (the
// latest valid event on its subject): the decoded event (nil when
// undecodable) and why it must be quarantined, if it must.
func checkEntry(e Entry, prev *pb.Event, keys ledger.Keys) (*pb.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(e.Data, ev); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ledger.ErrCorrupt, ledger.ErrUndecodable, err)
	}
	if ev.GetSubject() != e.Subject {
		return ev, fmt.Errorf("%w: event names subject %s", ledger.ErrCorrupt, ev.GetSubject())
	}
	if _, _, ok := ledger.ParseExecutionSubject(e.Subject); !ok {
		return ev, fmt.Errorf("%w: %s is not an execution subject", ledger.ErrCorrupt, e.Subject)
	}
	if err := ledger.CheckSignedData(ev, e.Data, keys); err != nil {
		return ev, err
	}
	if err := ledger.CheckFollows(prev, ev); err != nil { // CheckSignedData checked the hash
		return ev, err
	}
	return ev, nil
}

// intentToken is the intent part of any subject under an execution
// prefix (pc.exec. or a lane's), valid execution id or not: a message
// there moves the intent filter's last sequence whatever it holds.
func intentToken(subject string) (string, bool) {
	_, rest, ok := ledger.SubjectLane(subject)
	if !ok {
		return "", false
	}
	token, _, ok := strings.Cut(rest, ".")
	return token, ok && token != ""
}

// owns reports whether subject is an execution subject of this lane that
// the ledger puts here.
func (p *executions) owns(subject string) bool {
	k, _, _ := ledger.SubjectLane(subject)
	return k == p.lane && p.lanes.Owns(subject)
}

// ownsToken reports whether a message on subject moves its intent's row:
// it is in this lane and the intent lives here (a ledger of one lane:
// always; read-only executions, spread over lanes, share a token no
// decision reads, so only lane 0 keeps its row).
func (p *executions) ownsToken(subject, token string) bool {
	if p.lanes.Count() == 1 {
		return true
	}
	k, _, _ := ledger.SubjectLane(subject)
	if token == ledger.ReadOnlyToken {
		return k == 0 && p.lane == 0
	}
	return k == p.lane && p.lanes.Of(token, "") == p.lane
}

// CatchUp folds until the views hold everything the stream held when it
// was called, reporting progress (applied, total) after every batch. It is
// the engine of `portcullis rebuild`.
func (p *Projector) CatchUp(ctx context.Context, progress func(applied, total uint64)) error {
	total, err := p.src.LastSeq(ctx)
	if err != nil {
		return err
	}
	cp, err := p.checkpoint(p.stream)
	if err != nil {
		return err
	}
	if cp >= total {
		if progress != nil {
			progress(cp, total)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := errors.New("caught up")
	err = p.src.Tail(ctx, cp+1, func(entries []Entry) error {
		if err := p.Apply(ctx, entries); err != nil {
			return err
		}
		applied := entries[len(entries)-1].Seq
		if progress != nil {
			progress(applied, total)
		}
		if applied >= total {
			return done
		}
		return nil
	})
	if errors.Is(err, done) {
		return nil
	}
	return err
}
