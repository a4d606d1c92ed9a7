package pebble

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// The quarantine view: every stored message a projector refused to fold,
// keyed by stream and sequence, written in the batch of the rows folded
// with it (so a rebuild finds the same ones again).

func quarantineKey(stream string, seq uint64) []byte {
	k := key(quarantinePrefix, stream+"/")
	return binary.BigEndian.AppendUint64(k, seq)
}

func setQuarantined(b *pebble.Batch, qs []*pb.Quarantined) error {
	for _, q := range qs {
		val, err := proto.Marshal(q)
		if err != nil {
			return err
		}
		if err := b.Set(quarantineKey(q.GetStream(), q.GetSeq()), val, nil); err != nil {
			return err
		}
	}
	return nil
}

func (v *Views) countQuarantined() (uint64, error) {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: quarantinePrefix, UpperBound: prefixEnd(quarantinePrefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// QuarantinedTotal is how many messages the quarantine view holds.
func (v *Views) QuarantinedTotal() uint64 { return v.quarantined.Load() }

// ListQuarantined returns up to limit quarantined messages after afterSeq
// of afterStream ("": the executions stream; with afterSeq 0 and no
// stream, from the first), in (stream, sequence) order: the executions
// stream, then its shards PORTCULLIS_EXECUTIONS_<k>, then the streams
// after them by name.
func (v *Views) ListQuarantined(_ context.Context, afterStream string, afterSeq uint64, limit int) ([]*pb.Quarantined, error) {
	lower := quarantinePrefix
	if afterStream == "" && afterSeq > 0 {
		afterStream = ledger.ExecutionsStream
	}
	if afterStream != "" {
		lower = quarantineKey(afterStream, afterSeq+1)
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(quarantinePrefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.Quarantined
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		q := new(pb.Quarantined)
		if err := proto.Unmarshal(it.Value(), q); err != nil {
			return nil, fmt.Errorf("quarantine view: %w: %v", ledger.ErrCorrupt, err)
		}
		out = append(out, q)
	}
	return out, it.Error()
}
