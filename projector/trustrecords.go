package projector

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/trust"
	"google.golang.org/protobuf/proto"
)

// The records no execution, budget or session view is folded from still
// pass the trust checks, and what fails them goes to the same quarantine
// view, metric and log as a bad ledger event: the checkpoints stream
// (signed, chained events) and the enrollment records of the meta stream
// (signed by the ledger's root). Nothing is folded from either (the
// keyring reads enrollments itself, the sealer reads the last valid
// checkpoint); these projectors only find and record what is forged.

// EnrollSubjectPrefix is where the meta stream stores enrollment records:
// pc.meta.enroll.<gateway id>.<record digest>.
const EnrollSubjectPrefix = "pc.meta.enroll."

// NewEnrollments returns a Projector of the enrollment records of the meta
// stream (named stream; src should bring only subjects under
// EnrollSubjectPrefix, others are passed over): a record that does not
// decode or that root did not sign is quarantined. It keeps only its mark
// (the last record's sequence and the running digest of the records it
// read).
func NewEnrollments(stream string, src Source, store Store, root ed25519.PublicKey, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{now: time.Now}
	en := &enrollments{stream: stream, store: store, root: root, guard: g, log: log}
	return &Projector{stream: stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: en.apply, log: log, guard: g}
}

type enrollments struct {
	stream string
	store  Store
	root   ed25519.PublicKey
	guard  *guard
	log    *slog.Logger
}

func (en *enrollments) apply(_ context.Context, entries []Entry, mark Mark) error {
	var quarantined []*pb.Quarantined
	for _, e := range entries {
		if !strings.HasPrefix(e.Subject, EnrollSubjectPrefix) {
			continue
		}
		fault := CheckEnrollment(en.root, e.Subject, e.Data)
		if fault == nil {
			continue
		}
		claims := &pb.Event{GatewayId: trust.ClaimedGatewayID(e.Data)}
		quarantined = append(quarantined, en.guard.quarantine(en.stream, e, claims, fault))
		en.log.Warn("enrollment record quarantined", "stream", en.stream, "seq", e.Seq, "subject", e.Subject, "reason", fault)
	}
	if err := en.store.Write(en.stream, nil, nil, quarantined, mark); err != nil {
		return fmt.Errorf("projector %s: write views: %w", en.stream, err)
	}
	return nil
}

// CheckEnrollment is why a stored enrollment record must be quarantined
// (nil: root signed it): undecodable (ledger.ErrUndecodable) or not signed
// by root (ledger.ErrBadSignature, the record is forged). audit verify
// applies the same rule.
func CheckEnrollment(root ed25519.PublicKey, subject string, data []byte) error {
	_, err := trust.OpenStoredEnrollment(root, data)
	if err == nil {
		return nil
	}
	where := ""
	if subject != "" {
		where = " on " + subject
	}
	if errors.Is(err, trust.ErrUndecodable) {
		return fmt.Errorf("%w: %w: enrollment record%s is not a signed record", ledger.ErrCorrupt, ledger.ErrUndecodable, where)
	}
	return fmt.Errorf("%w: %w: enrollment record%s not trusted: %v", ledger.ErrCorrupt, ledger.ErrBadSignature, where, err)
}

// Link is what a chain needs of a subject's last valid event.
type Link struct {
	Seq  uint64
	Hash []byte
}

// LinkStore is the write side of a projector that keeps of each subject
// only its last valid event's link (the checkpoints stream).
type LinkStore interface {
	Checkpoint(stream string) (uint64, error)
	Mark(stream string) (Mark, error)
	// Link is the last valid event's link on subject (ledger.ErrNotFound:
	// none yet).
	Link(subject string) (Link, error)
	// WriteLinks stores the links, the quarantined messages and the mark
	// in one atomic batch.
	WriteLinks(stream string, links map[string]Link, quarantined []*pb.Quarantined, mark Mark) error
}

// NewCheckpoints returns a Projector of the checkpoints stream: every
// message must decode, name the subject it is stored on, carry a
// checkpoint of the stream that subject names (subjectOf(stream) is where
// a stream's checkpoints go), have the right hash, be signed by an
// enrolled key of its writer (SetKeys) and link to the previous valid
// checkpoint on its subject. One that fails is quarantined and the chain
// goes on from the last valid one, as on every other stream. (Whether a
// checkpoint's digest matches the events it seals is for audit verify,
// which recomputes them; the views keep only the latest.)
func NewCheckpoints(stream string, subjectOf func(stream string) string, src Source, store LinkStore, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{now: time.Now}
	c := &checkpoints{stream: stream, subjectOf: subjectOf, store: store, guard: g, log: log}
	return &Projector{stream: stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: c.apply, log: log, guard: g}
}

type checkpoints struct {
	stream    string
	subjectOf func(string) string
	store     LinkStore
	guard     *guard
	log       *slog.Logger
}

func (c *checkpoints) apply(_ context.Context, entries []Entry, mark Mark) error {
	links := map[string]Link{}
	var quarantined []*pb.Quarantined
	for _, e := range entries {
		prev, ok := links[e.Subject]
		if !ok {
			l, err := c.store.Link(e.Subject)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("projector %s seq %d: %w", c.stream, e.Seq, err)
			}
			prev = l
		}
		ev, fault := c.check(e, prev)
		if errors.Is(fault, ledger.ErrKeysUnavailable) {
			return fmt.Errorf("projector %s seq %d: %w", c.stream, e.Seq, fault) // retried, never quarantined
		}
		if fault != nil {
			quarantined = append(quarantined, c.guard.quarantine(c.stream, e, ev, fault))
			c.log.Warn("checkpoint quarantined", "stream", c.stream, "seq", e.Seq, "subject", e.Subject, "reason", fault)
			continue
		}
		links[e.Subject] = Link{Seq: e.Seq, Hash: ev.GetHash()}
	}
	if err := c.store.WriteLinks(c.stream, links, quarantined, mark); err != nil {
		return fmt.Errorf("projector %s: write views: %w", c.stream, err)
	}
	return nil
}

// check decodes a stored checkpoint and says why it must be quarantined,
// if it must: the decoded event (nil when undecodable) and the fault.
func (c *checkpoints) check(e Entry, prev Link) (*pb.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(e.Data, ev); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ledger.ErrCorrupt, ledger.ErrUndecodable, err)
	}
	if ev.GetSubject() != e.Subject {
		return ev, fmt.Errorf("%w: event names subject %s", ledger.ErrCorrupt, ev.GetSubject())
	}
	cp := ev.GetCheckpoint()
	if cp == nil || ev.GetType() != pb.EventType_EVENT_TYPE_CHECKPOINT || c.subjectOf(cp.GetStream()) != e.Subject {
		return ev, fmt.Errorf("%w: event %s on %s is not a checkpoint of the stream its subject names", ledger.ErrCorrupt, ev.GetEventId(), e.Subject)
	}
	if err := ledger.CheckSignedData(ev, e.Data, c.guard.keys); err != nil {
		return ev, err
	}
	if string(ev.GetPrevHash()) != string(prev.Hash) {
		return ev, fmt.Errorf("%w: event %s on %s: chain broken (prev_hash does not match the last valid checkpoint)", ledger.ErrCorrupt, ev.GetEventId(), e.Subject)
	}
	return ev, nil
}
