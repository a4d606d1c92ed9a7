// Package pebble keeps the ledger's views in Pebble: the head of every
// subject (the latest event on an intent or an execution) and, per stream,
// the last applied stream sequence, written in the same batch as the rows
// it covers. The views are rebuildable from the streams at any time.
package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// Key layout. Heads sort by subject, so the executions of one stream sort
// by id, and ids are ULIDs: a reverse scan lists newest first.
var (
	headPrefix       = []byte("h/")
	checkpointPrefix = []byte("c/")
	execHeadPrefix   = append(append([]byte(nil), headPrefix...), "pc.exec."...)
)

// Views is a ledger.Views and a projector.Store on one Pebble database.
type Views struct {
	db *pebble.DB
}

var (
	_ ledger.Views    = (*Views)(nil)
	_ projector.Store = (*Views)(nil)
)

// Open opens (or creates) the views in dir.
func Open(dir string) (*Views, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("open views %s: %w", dir, err)
	}
	return &Views{db: db}, nil
}

// Close flushes and closes the database.
func (v *Views) Close() error { return v.db.Close() }

// Checkpoint returns the last applied sequence of stream (0 when none).
func (v *Views) Checkpoint(stream string) (uint64, error) {
	val, closer, err := v.db.Get(checkpointKey(stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(val) != 8 {
		return 0, fmt.Errorf("checkpoint %s: %d bytes", stream, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// Write stores rows and the checkpoint in one batch. It does not fsync:
// the views are rebuilt from the stream, which is the durable record, and
// the checkpoint written in the same batch keeps rows and checkpoint
// consistent after a crash.
func (v *Views) Write(stream string, rows []projector.Row, checkpoint uint64) error {
	b := v.db.NewBatch()
	defer b.Close()
	for _, r := range rows {
		val := make([]byte, 8+len(r.Data))
		binary.BigEndian.PutUint64(val, r.Seq)
		copy(val[8:], r.Data)
		if err := b.Set(headKey(r.Subject), val, nil); err != nil {
			return err
		}
	}
	var cp [8]byte
	binary.BigEndian.PutUint64(cp[:], checkpoint)
	if err := b.Set(checkpointKey(stream), cp[:], nil); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

// Head returns the latest folded event on subject.
func (v *Views) Head(_ context.Context, subject string) (ledger.Head, error) {
	val, closer, err := v.db.Get(headKey(subject))
	if errors.Is(err, pebble.ErrNotFound) {
		return ledger.Head{}, ledger.ErrNotFound
	}
	if err != nil {
		return ledger.Head{}, fmt.Errorf("view head %s: %w", subject, err)
	}
	defer closer.Close()
	return decodeHead(subject, val)
}

func decodeHead(subject string, val []byte) (ledger.Head, error) {
	if len(val) < 8 {
		return ledger.Head{}, fmt.Errorf("view head %s: %w: short row", subject, ledger.ErrCorrupt)
	}
	ev := new(pb.Event)
	if err := proto.Unmarshal(val[8:], ev); err != nil {
		return ledger.Head{}, fmt.Errorf("view head %s: %w: %v", subject, ledger.ErrCorrupt, err)
	}
	return ledger.Head{Seq: binary.BigEndian.Uint64(val), Event: ev}, nil
}

// ListExecutions scans execution heads newest first.
func (v *Views) ListExecutions(_ context.Context, q ledger.ListQuery) ([]*pb.Execution, string, error) {
	upper := prefixEnd(execHeadPrefix)
	if q.PageToken != "" {
		upper = headKey(ledger.ExecutionSubject(q.PageToken))
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: execHeadPrefix, UpperBound: upper})
	if err != nil {
		return nil, "", err
	}
	defer it.Close()
	var out []*pb.Execution
	for ok := it.Last(); ok; ok = it.Prev() {
		subject := string(it.Key()[len(headPrefix):])
		h, err := decodeHead(subject, it.Value())
		if err != nil {
			return nil, "", err
		}
		x := h.Event.GetExecutionChanged().GetExecution()
		if (q.State != pb.State_STATE_UNSPECIFIED && x.GetState() != q.State) || (q.Tool != "" && x.GetTool() != q.Tool) {
			continue
		}
		x.StreamSeq = h.Seq
		out = append(out, x)
		if len(out) == q.PageSize {
			if it.Prev() {
				return out, x.GetExecutionId(), it.Error()
			}
			break
		}
	}
	return out, "", it.Error()
}

// Dump returns every key and value, for comparing views built two ways.
func (v *Views) Dump() (map[string][]byte, error) {
	it, err := v.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make(map[string][]byte)
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = bytes.Clone(it.Value())
	}
	return out, it.Error()
}

func headKey(subject string) []byte {
	return append(append(make([]byte, 0, len(headPrefix)+len(subject)), headPrefix...), subject...)
}

func checkpointKey(stream string) []byte {
	return append(append([]byte(nil), checkpointPrefix...), stream...)
}

func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	end[len(end)-1]++
	return end
}

// quietLogger keeps Pebble's informational chatter off stdout; fatal
// conditions still stop the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", a...)
}
func (quietLogger) Fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", a...)
	os.Exit(1)
}
