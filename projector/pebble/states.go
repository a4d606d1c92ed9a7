package pebble

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// ExecutionStates is how many executions the views hold in each state
// (every state that has one). It is kept with every batch of heads, so
// reading it costs a copy of a few counters, not a scan.
func (v *Views) ExecutionStates() map[pb.State]int64 {
	v.statesMu.Lock()
	defer v.statesMu.Unlock()
	return maps.Clone(v.states)
}

// moveStates adds to b the counts after heads replace what the views held
// (a head's Replaced) and returns them, or nil when no count moves. The
// caller holds statesMu until the batch is committed.
func (v *Views) moveStates(b *pebble.Batch, heads []projector.Row) (map[pb.State]int64, error) {
	var next map[pb.State]int64
	move := func(ev *pb.Event, d int64) {
		x := ev.GetExecutionChanged().GetExecution()
		if x == nil {
			return
		}
		if next == nil {
			next = maps.Clone(v.states)
			if next == nil {
				next = map[pb.State]int64{}
			}
		}
		if next[x.GetState()] += d; next[x.GetState()] == 0 {
			delete(next, x.GetState())
		}
	}
	for _, r := range heads {
		if old, cur := r.Replaced.GetExecutionChanged().GetExecution(), r.Event.GetExecutionChanged().GetExecution(); old != nil && cur != nil && old.GetState() == cur.GetState() {
			continue
		}
		move(r.Replaced, -1)
		move(r.Event, +1)
	}
	if next == nil || maps.Equal(next, v.states) {
		return nil, nil
	}
	val, err := encodeStates(next)
	if err != nil {
		return nil, err
	}
	return next, b.Set(statesKey, val, nil)
}

// loadStates reads the counts, or counts the heads once (views written
// before the counts were kept) and stores what it found.
func (v *Views) loadStates() error {
	val, closer, err := v.db.Get(statesKey)
	if err == nil {
		defer closer.Close()
		var raw map[int32]int64
		if err := json.Unmarshal(val, &raw); err != nil {
			return fmt.Errorf("view %s: %w: %v", statesKey, ledger.ErrCorrupt, err)
		}
		v.states = make(map[pb.State]int64, len(raw))
		for s, n := range raw {
			v.states[pb.State(s)] = n
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	m := map[pb.State]int64{}
	if err := v.EachExecution(func(x *pb.Execution) { m[x.GetState()]++ }); err != nil {
		return err
	}
	val, err = encodeStates(m)
	if err != nil {
		return err
	}
	if err := v.db.Set(statesKey, val, pebble.Sync); err != nil {
		return err
	}
	v.states = m
	return nil
}

func encodeStates(m map[pb.State]int64) ([]byte, error) {
	out := make(map[int32]int64, len(m))
	for s, n := range m {
		out[int32(s)] = n
	}
	return json.Marshal(out) // keys sorted: the same counts, the same bytes
}
