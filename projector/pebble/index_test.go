package pebble

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Listing by state, by tool or both pages through exactly what a scan of
// every head finds, newest first, while executions change state; and
// views written before the indexes (the dispatched index under "d/") get
// them once when opened.
func TestListExecutionsByStateAndTool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	deadline := timestamppb.New(time.Now().Add(-time.Minute)) // overdue
	states := []pb.State{pb.State_STATE_ACCEPTED, pb.State_STATE_DISPATCHED, pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DENIED}
	tools := []string{"deploy_release", "read_status", "pay"}
	heads := map[string]*pb.Event{}
	seq := uint64(0)
	write := func(xs []*pb.Execution) {
		t.Helper()
		var rows []projector.Row
		for _, x := range xs {
			seq++
			if x.GetState() == pb.State_STATE_DISPATCHED {
				x.DispatchDeadline = deadline
			}
			ev := &pb.Event{ExecutionId: x.GetExecutionId(), Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x}}}
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			prev := heads[x.GetExecutionId()]
			rows = append(rows, projector.Row{Subject: "pc.exec.f1." + x.GetExecutionId(), Seq: seq, Data: data, Event: ev, Replaced: prev, Accepted: prev == nil})
			heads[x.GetExecutionId()] = ev
		}
		if err := v.Write(ledger.ExecutionsStream, rows, nil, nil, projector.Mark{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(i int, s pb.State) *pb.Execution {
		return &pb.Execution{ExecutionId: fmt.Sprintf("act_%04d", i), Tool: tools[i%len(tools)], State: s}
	}
	const n = 300
	var batch []*pb.Execution
	for i := range n {
		batch = append(batch, exec(i, pb.State_STATE_ACCEPTED))
	}
	write(batch)
	// Some move on, some twice, in several batches.
	for round := range 3 {
		batch = batch[:0]
		for i := round; i < n; i += 7 {
			batch = append(batch, exec(i, states[(i+round)%len(states)]))
		}
		write(batch)
	}

	check := func(what string) {
		t.Helper()
		for _, q := range []ledger.ListQuery{
			{}, {State: pb.State_STATE_DISPATCHED}, {State: pb.State_STATE_ACCEPTED}, {State: pb.State_STATE_DENIED},
			{Tool: "pay"}, {Tool: "none"}, {State: pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, Tool: "read_status"},
			{State: pb.State_STATE_OUTCOME_UNKNOWN},
		} {
			var want []string
			for id, ev := range heads {
				x := ev.GetExecutionChanged().GetExecution()
				if (q.State == 0 || x.GetState() == q.State) && (q.Tool == "" || x.GetTool() == q.Tool) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			slices.Reverse(want)
			var got []string
			q.PageSize = 7
			for page := 0; ; page++ {
				xs, next, err := v.ListExecutions(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range xs {
					got = append(got, x.GetExecutionId())
				}
				if next == "" {
					break
				}
				if page > n {
					t.Fatalf("%s %+v: pages without end", what, q)
				}
				q.PageToken = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: list %v/%q: %d executions %v, want %d %v", what, q.State, q.Tool, len(got), head(got), len(want), head(want))
			}
		}
		// The state index holds each execution once, under its state now.
		it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: stateIndexPrefix, UpperBound: prefixEnd(stateIndexPrefix)})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()[len(stateIndexPrefix):]
			s, id := pb.State(binary.BigEndian.Uint16(k)), string(k[3:])
			if got := heads[id].GetExecutionChanged().GetExecution().GetState(); got != s {
				t.Fatalf("%s: state row %v for %s, which is %v", what, s, id, got)
			}
			rows++
		}
		it.Close()
		if rows != len(heads) {
			t.Fatalf("%s: %d state rows for %d executions", what, rows, len(heads))
		}
		overdue, err := v.Overdue(ctx, time.Now(), n)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for id, ev := range heads {
			if ev.GetExecutionChanged().GetExecution().GetState() == pb.State_STATE_DISPATCHED {
				want = append(want, id)
			}
		}
		slices.Sort(overdue)
		slices.Sort(want)
		if !slices.Equal(overdue, want) || len(want) == 0 {
			t.Fatalf("%s: overdue %v, want %v", what, head(overdue), head(want))
		}
	}
	check("incremental")

	// Views as an older version wrote them: no state or tool rows, no
	// index version, the dispatched index under "d/".
	b := v.db.NewBatch()
	for _, p := range [][]byte{stateIndexPrefix, toolIndexPrefix, dispatchedPrefix} {
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(indexVersionKey, nil); err != nil {
		t.Fatal(err)
	}
	for _, ev := range heads {
		if x := ev.GetExecutionChanged().GetExecution(); x.GetState() == pb.State_STATE_DISPATCHED {
			if err := b.Set(append(append([]byte(nil), oldDispatchedPrefix...), dispatchedKey(x)[len(dispatchedPrefix):]...), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	v = reopen(t, v, dir)
	defer v.Close()
	check("migrated")
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: oldDispatchedPrefix, UpperBound: prefixEnd(oldDispatchedPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("an old dispatched row is left: %q", it.Key())
	}
}

func head(ids []string) []string { return ids[:min(len(ids), 5)] }
