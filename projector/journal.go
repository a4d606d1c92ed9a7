package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// NewJournal returns a Projector that keeps only the running digest (the
// mark the sealer signs) of a stream whose rows nobody reads from the views,
// such as the sessions journal, and quarantines what fails its checks, so
// that stream is sealed like the others.
func NewJournal(stream string, src Source, store Store, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{now: time.Now}
	j := &journal{stream: stream, store: store, guard: g, log: log}
	return &Projector{stream: stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: j.apply, log: log, guard: g}
}

type journal struct {
	stream string
	store  Store
	guard  *guard
	log    *slog.Logger
}

func (j *journal) apply(_ context.Context, entries []Entry, mark Mark) error {
	var quarantined []*pb.Quarantined
	for _, e := range entries {
		ev := new(pb.Event)
		var fault error
		if err := proto.Unmarshal(e.Data, ev); err != nil {
			ev, fault = nil, fmt.Errorf("%w: %w: %v", ledger.ErrCorrupt, ledger.ErrUndecodable, err)
		} else if ev.GetSubject() != e.Subject {
			fault = fmt.Errorf("%w: event names subject %s", ledger.ErrCorrupt, ev.GetSubject())
		} else {
			fault = ledger.CheckSigned(ev, j.guard.keys)
		}
		if errors.Is(fault, ledger.ErrKeysUnavailable) {
			return fmt.Errorf("projector %s seq %d: %w", j.stream, e.Seq, fault) // retried, never quarantined
		}
		if fault != nil {
			quarantined = append(quarantined, j.guard.quarantine(j.stream, e, ev, fault))
			j.log.Warn("event quarantined", "stream", j.stream, "seq", e.Seq, "subject", e.Subject, "reason", fault)
		}
	}
	if err := j.store.Write(j.stream, nil, nil, quarantined, mark); err != nil {
		return fmt.Errorf("projector %s: write views: %w", j.stream, err)
	}
	return nil
}
