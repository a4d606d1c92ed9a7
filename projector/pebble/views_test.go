package pebble

import (
	"context"
	"slices"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The dispatched index holds an execution only while it is DISPATCHED,
// under its latest deadline, and Overdue reads only what is due.
func TestOverdueIndex(t *testing.T) {
	v, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const id = "act_01M8RC0WVC1SVYYKBZ5A5NRX1Z"
	ev := func(s pb.State, deadline time.Time) *pb.Event {
		return &pb.Event{ExecutionId: id, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{ExecutionId: id, State: s, DispatchDeadline: timestamppb.New(deadline)}}}}
	}
	seq := uint64(0)
	write := func(next, replaced *pb.Event) {
		t.Helper()
		seq++
		row := projector.Row{Subject: "pc.exec.f1." + id, Seq: seq, Event: next, Replaced: replaced}
		if err := v.Write("S", []projector.Row{row}, nil, nil, projector.Mark{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	overdue := func(at time.Time) []string {
		t.Helper()
		ids, err := v.Overdue(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	d1 := ev(pb.State_STATE_DISPATCHED, t0.Add(time.Second))
	write(d1, nil)
	if got := overdue(t0.Add(time.Second - time.Nanosecond)); len(got) != 0 {
		t.Fatalf("due before its deadline: %v", got)
	}
	if got := overdue(t0.Add(time.Second)); !slices.Equal(got, []string{id}) {
		t.Fatalf("at its deadline: %v", got)
	}
	// Resent (unknown outcome, dispatched again) folded as one row: the
	// old deadline's entry goes.
	d2 := ev(pb.State_STATE_DISPATCHED, t0.Add(time.Minute))
	write(d2, d1)
	if got := overdue(t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("stale entry under the first deadline: %v", got)
	}
	if got := overdue(t0.Add(time.Minute)); !slices.Equal(got, []string{id}) {
		t.Fatalf("at the second deadline: %v", got)
	}
	// Leaving DISPATCHED removes it.
	write(ev(pb.State_STATE_OUTCOME_UNKNOWN, t0.Add(time.Minute)), d2)
	if got := overdue(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("left DISPATCHED but still indexed: %v", got)
	}
}
