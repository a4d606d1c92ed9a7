package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// The links of the checkpoints stream: of each checkpoint subject only
// its last valid checkpoint's sequence and hash, what the next one must
// link to (projector.NewCheckpoints). Messages that fail go to the
// quarantine view in the same batch.

// linkPrefix: subject → 8-byte seq + hash of its last valid event.
var linkPrefix = []byte("l/")

var _ projector.LinkStore = (*Views)(nil)

// Link returns the last valid event's link on subject.
func (v *Views) Link(subject string) (projector.Link, error) {
	val, closer, err := v.db.Get(key(linkPrefix, subject))
	if errors.Is(err, pebble.ErrNotFound) {
		return projector.Link{}, ledger.ErrNotFound
	}
	if err != nil {
		return projector.Link{}, fmt.Errorf("view link %s: %w", subject, err)
	}
	defer closer.Close()
	if len(val) < 8 {
		return projector.Link{}, fmt.Errorf("view link %s: %w: short row", subject, ledger.ErrCorrupt)
	}
	return projector.Link{Seq: binary.BigEndian.Uint64(val), Hash: bytes.Clone(val[8:])}, nil
}

// WriteLinks stores links, quarantined messages and the mark of stream in
// one batch.
func (v *Views) WriteLinks(stream string, links map[string]projector.Link, quarantined []*pb.Quarantined, mark projector.Mark) error {
	b := v.db.NewBatch()
	defer b.Close()
	if err := setQuarantined(b, quarantined); err != nil {
		return err
	}
	for subject, l := range links {
		if err := b.Set(key(linkPrefix, subject), append(binary.BigEndian.AppendUint64(nil, l.Seq), l.Hash...), nil); err != nil {
			return err
		}
	}
	if err := setMark(b, stream, mark); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	v.quarantined.Add(uint64(len(quarantined)))
	v.setApplied(stream, mark.Seq)
	return nil
}
