package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/projector"
)

// Checkpoints: the stream that holds them and how often a gateway seals.
const (
	AuditStream            = "PORTCULLIS_AUDIT"
	checkpointSubjectPfx   = "pc.audit."
	DefaultCheckpointEvery = 30 * time.Second
)

// SealedStreams are the streams a gateway seals with checkpoints: every
// stream of the record but the checkpoints' own.
var SealedStreams = []string{ledger.ExecutionsStream, keeper.Stream, mcp.SessionsStream}

// CheckpointSubject is where checkpoints of stream are appended.
func CheckpointSubject(stream string) string { return checkpointSubjectPfx + stream }

// sealer appends signed checkpoints over the record's streams, from the
// running digests the projectors keep, whenever a stream moved since the
// last one. Gateways seal concurrently; a compare-and-set on the checkpoint
// subject lets one of them win each round.
type sealer struct {
	log     ledger.Log
	marks   func(stream string) (seq uint64, digest []byte, err error)
	key     ed25519.PrivateKey
	id      string
	streams []string // nil: SealedStreams (one execution lane)
	sealed  map[string]uint64
	// folded waits until the checkpoints' projector has read up to seq,
	// and link is the last valid checkpoint it found on a subject (nil:
	// trust the log's latest message, as tests of the sealer alone do).
	folded func(ctx context.Context, seq uint64) error
	link   func(subject string) (projector.Link, error)
}

func (s *sealer) seal(ctx context.Context) error {
	var errs []error
	streams := s.streams
	if streams == nil {
		streams = SealedStreams
	}
	for _, stream := range streams {
		seq, digest, err := s.marks(stream)
		if err != nil || seq == 0 || seq <= s.sealed[stream] {
			continue
		}
		subj := CheckpointSubject(stream)
		head, err := s.log.Last(ctx, subj)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		prev, valid, err := s.lastValid(ctx, subj, head)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cp := head.Event.GetCheckpoint(); valid && cp != nil && cp.GetLastSeq() >= seq {
			s.sealed[stream] = cp.GetLastSeq()
			continue
		}
		ev := &pb.Event{
			EventId: "evt_" + ulid.Make().String(), Type: pb.EventType_EVENT_TYPE_CHECKPOINT, Subject: subj,
			TimeUnixNano: time.Now().UnixNano(), GatewayId: s.id,
			Body: &pb.Event_Checkpoint{Checkpoint: &pb.Checkpoint{Stream: stream, LastSeq: seq, RunningDigest: digest}},
		}
		ledger.Seal(ev, prev)
		ledger.Sign(ev, s.key)
		if _, err := s.log.Append(ctx, ledger.Message{Subject: subj, ExpectedSeq: head.Seq, Event: ev}); err != nil {
			if !errors.Is(err, ledger.ErrConflict) { // another gateway sealed first
				errs = append(errs, err)
			}
			continue
		}
		s.sealed[stream] = seq
	}
	return errors.Join(errs...)
}

// foldWaitMax bounds the sealer's wait for the checkpoints' projector.
const foldWaitMax = 5 * time.Second

// lastValid is the hash a new checkpoint on subj chains onto, and whether
// the log's latest message there (head) is that valid checkpoint. The log
// checked head's hash and signature, but a genuine checkpoint replayed at
// the end of its subject passes those: only the checkpoints' projector,
// which follows the chain from its start, knows the last valid one. A
// checkpoint chained onto a replay would be quarantined, and every one
// after it, so sealing waits (to the next round) until the projector has
// read up to head (bounded; else it seals next round).
func (s *sealer) lastValid(ctx context.Context, subj string, head ledger.Head) (prev []byte, valid bool, err error) {
	if s.link == nil || head.Seq == 0 {
		return head.Event.GetHash(), true, nil
	}
	wctx, cancel := context.WithTimeout(ctx, foldWaitMax)
	defer cancel()
	if err := s.folded(wctx, head.Seq); err != nil {
		return nil, false, fmt.Errorf("seal %s: the checkpoints' projector has not read up to %d: %w", subj, head.Seq, err)
	}
	l, err := s.link(subj)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false, nil // only quarantined messages: the first valid checkpoint
	}
	if err != nil {
		return nil, false, err
	}
	return l.Hash, l.Seq == head.Seq, nil
}
