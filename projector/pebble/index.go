package pebble

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// Listing executions by state or by tool reads an index of its own, so a
// page of a rare state costs a page of reads, not a scan of every head
// until the page fills. Both indexes sort by execution id within their
// prefix (ids are ULIDs: a reverse scan lists newest first, as x/ does) and
// are written in the batch of the heads they index.
var (
	stateIndexPrefix = []byte("xs/") // 2-byte state + "/" + execution id → "" (x/ has the subject)
	toolIndexPrefix  = []byte("xt/") // tool + 0x00 + execution id → ""
	// indexVersionKey says which layout of the indexes the views hold
	// (absent: before the state and tool indexes, when the dispatched index
	// lived under "d/", which it shared with the budget decisions).
	indexVersionKey     = []byte("n/index")
	oldDispatchedPrefix = []byte("d/")
)

const indexVersion = 1

// migrateBatch bounds one batch of the index migration.
const migrateBatch = 4096

func stateIndexKey(s pb.State, id string) []byte {
	k := binary.BigEndian.AppendUint16(append([]byte(nil), stateIndexPrefix...), uint16(s))
	return append(append(k, '/'), id...)
}

func toolIndexKey(tool, id string) []byte {
	k := append(append(append([]byte(nil), toolIndexPrefix...), tool...), 0)
	return append(k, id...)
}

// setIndexes keeps the state and tool indexes of one head: a new
// execution gets both rows, a change of state moves its state row.
func setIndexes(b *pebble.Batch, r projector.Row) error {
	cur := r.Event.GetExecutionChanged().GetExecution()
	if cur == nil {
		return nil
	}
	old := r.Replaced.GetExecutionChanged().GetExecution()
	if old != nil && old.GetState() == cur.GetState() {
		return nil
	}
	if old != nil {
		if err := b.Delete(stateIndexKey(old.GetState(), old.GetExecutionId()), nil); err != nil {
			return err
		}
	} else if err := b.Set(toolIndexKey(cur.GetTool(), cur.GetExecutionId()), nil, nil); err != nil {
		return err
	}
	return b.Set(stateIndexKey(cur.GetState(), cur.GetExecutionId()), nil, nil)
}

// listPrefix is the index ListExecutions reads for q: by state, by tool,
// else every execution by id.
func listPrefix(q ledger.ListQuery) []byte {
	switch {
	case q.State != pb.State_STATE_UNSPECIFIED:
		return stateIndexKey(q.State, "")
	case q.Tool != "":
		return toolIndexKey(q.Tool, "")
	}
	return execIDPrefix
}

// migrateIndexes brings views written before indexVersion to it, once:
// every head gets its state and tool rows, and the dispatched index moves
// from "d/" to its own prefix. It is idempotent (an interrupted run is
// redone on the next open) and commits in bounded batches.
func (v *Views) migrateIndexes() error {
	val, closer, err := v.db.Get(indexVersionKey)
	if err == nil {
		have := len(val) == 1 && int(val[0]) >= indexVersion
		closer.Close()
		if have {
			return nil
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	b := v.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	var werr error
	err = v.EachExecution(func(x *pb.Execution) {
		if werr == nil {
			werr = migrateOne(b, x)
		}
		if n++; werr == nil && n%migrateBatch == 0 {
			if werr = b.Commit(pebble.NoSync); werr == nil {
				b.Close()
				b = v.db.NewBatch()
			}
		}
	})
	if err = errors.Join(err, werr); err != nil {
		return err
	}
	if err := b.Set(indexVersionKey, []byte{indexVersion}, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// migrateOne writes one execution's index rows into b and moves its
// dispatched row from the old prefix.
func migrateOne(b *pebble.Batch, x *pb.Execution) error {
	if err := b.Set(stateIndexKey(x.GetState(), x.GetExecutionId()), nil, nil); err != nil {
		return err
	}
	if err := b.Set(toolIndexKey(x.GetTool(), x.GetExecutionId()), nil, nil); err != nil {
		return err
	}
	if x.GetState() != pb.State_STATE_DISPATCHED || x.GetDispatchDeadline() == nil {
		return nil
	}
	old := append(append([]byte(nil), oldDispatchedPrefix...), dispatchedKey(x)[len(dispatchedPrefix):]...)
	if err := b.Delete(old, nil); err != nil {
		return err
	}
	return b.Set(dispatchedKey(x), nil, nil)
}
