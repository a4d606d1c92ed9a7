package server

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
)

// The trust records' projectors: they fold nothing, they quarantine what
// fails the trust checks in the checkpoints stream (projector.NewCheckpoints)
// and among the enrollment records of the meta stream
// (projector.NewEnrollments), into the quarantine view every other
// projector writes to.

// trustProjectors returns the projector of the checkpoints stream (keys
// check its writers) and that of the meta stream's enrollment records
// (root checks them), both into views.
func trustProjectors(checkpoints, meta jetstream.Stream, views *pebbleviews.Views, keys ledger.Keys, root ed25519.PublicKey, lg *slog.Logger) (*projector.Projector, *projector.Projector) {
	cp := projector.NewCheckpoints(AuditStream, CheckpointSubject, ljs.Source{Stream: checkpoints}, views, lg)
	cp.SetKeys(keys)
	return cp, projector.NewEnrollments(metaStream, enrollmentSource(meta), views, root, lg)
}

// enrollmentSource reads only the enrollment records of the meta stream
// (not its session owners, which grow with the MCP sessions).
func enrollmentSource(meta jetstream.Stream) projector.Source {
	return filteredSource{Source: ljs.Source{Stream: filteredStream{Stream: meta, filter: EnrollSubjectPfx + ">"}}, stream: meta, filter: EnrollSubjectPfx + ">"}
}

// filteredStream is a stream whose ordered consumers deliver only the
// subjects matching filter.
type filteredStream struct {
	jetstream.Stream
	filter string
}

func (f filteredStream) OrderedConsumer(ctx context.Context, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	cfg.FilterSubjects = []string{f.filter}
	return f.Stream.OrderedConsumer(ctx, cfg)
}

// filteredSource is a Source of the messages of one stream on subjects
// matching filter: its last sequence is the last such message's.
type filteredSource struct {
	ljs.Source
	stream jetstream.Stream
	filter string
}

func (s filteredSource) LastSeq(ctx context.Context) (uint64, error) {
	recs, err := readStored(ctx, s.stream, s.filter)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, r := range recs {
		last = max(last, r.Seq)
	}
	return last, nil
}

// readStored reads the last message of every subject of the meta stream
// matching filter (one per subject: the stream keeps one), as stored, in
// sequence order.
func readStored(ctx context.Context, meta jetstream.Stream, filter string) ([]audit.Record, error) {
	info, err := meta.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, err
	}
	var out []audit.Record
	for subj := range info.State.Subjects {
		m, err := meta.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return nil, err
		}
		out = append(out, audit.Record{Stream: metaStream, Seq: m.Sequence, Subject: m.Subject, Data: m.Data})
	}
	slices.SortFunc(out, func(a, b audit.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}
