package pebble

import (
	"maps"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// The executions-by-state counts follow every head a batch replaces,
// survive a reopen, and are recounted once from the heads when the views
// were written without them; they always equal a full scan.
func TestExecutionStatesCounted(t *testing.T) {
	dir := t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(id string, s pb.State) *pb.Event {
		return &pb.Event{ExecutionId: id, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{ExecutionId: id, State: s}}}}
	}
	seq := uint64(0)
	heads := map[string]*pb.Event{}
	write := func(stream string, evs map[string]*pb.Event) {
		t.Helper()
		var rows []projector.Row
		for id, ev := range evs {
			seq++
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, projector.Row{Subject: "pc.exec.f1." + id, Seq: seq, Data: data, Event: ev, Replaced: heads[id]})
			heads[id] = ev
		}
		if err := v.Write(stream, rows, nil, nil, projector.Mark{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	scan := func() map[pb.State]int64 {
		t.Helper()
		m := map[pb.State]int64{}
		if err := v.EachExecution(func(x *pb.Execution) { m[x.GetState()]++ }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	check := func(want map[pb.State]int64) {
		t.Helper()
		if got := v.ExecutionStates(); !maps.Equal(got, want) {
			t.Fatalf("counts %v, want %v", got, want)
		}
		if got := scan(); !maps.Equal(got, want) {
			t.Fatalf("scan %v, want %v", got, want)
		}
	}
	check(map[pb.State]int64{})
	write("S", map[string]*pb.Event{
		"a": exec("a", pb.State_STATE_ACCEPTED), "b": exec("b", pb.State_STATE_ACCEPTED), "c": exec("c", pb.State_STATE_ACCEPTED),
	})
	check(map[pb.State]int64{pb.State_STATE_ACCEPTED: 3})
	// Two lanes' projectors write the same views.
	write("S_1", map[string]*pb.Event{"a": exec("a", pb.State_STATE_DISPATCHED), "d": exec("d", pb.State_STATE_ACCEPTED)})
	write("S", map[string]*pb.Event{"b": exec("b", pb.State_STATE_OUTCOME_UNKNOWN)})
	check(map[pb.State]int64{pb.State_STATE_ACCEPTED: 2, pb.State_STATE_DISPATCHED: 1, pb.State_STATE_OUTCOME_UNKNOWN: 1})
	// A head rewritten with the same event (a quarantined event keeps it)
	// and a head without an execution count nothing.
	write("S", map[string]*pb.Event{"a": heads["a"], "intent": {ExecutionId: "x"}})
	want := map[pb.State]int64{pb.State_STATE_ACCEPTED: 2, pb.State_STATE_DISPATCHED: 1, pb.State_STATE_OUTCOME_UNKNOWN: 1}
	check(want)

	v = reopen(t, v, dir)
	check(want)

	// Views written before the counts were kept: recounted at open.
	if err := v.db.Delete(statesKey, nil); err != nil {
		t.Fatal(err)
	}
	v = reopen(t, v, dir)
	defer v.Close()
	check(want)
	write("S", map[string]*pb.Event{"c": exec("c", pb.State_STATE_DELIVERED)})
	check(map[pb.State]int64{pb.State_STATE_ACCEPTED: 1, pb.State_STATE_DISPATCHED: 1, pb.State_STATE_OUTCOME_UNKNOWN: 1, pb.State_STATE_DELIVERED: 1})
}

// reopen closes the views and opens them again from dir.
func reopen(t *testing.T, v *Views, dir string) *Views {
	t.Helper()
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
