package pebble

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The projector of lane 1 of 4 folds an intent that lives in lane 1, and
// quarantines an event on its stream for an intent of another lane
// without touching that intent's row: an intent's sequences come from
// its own lane only.
func TestLaneProjectorRefusesAnotherLanesIntent(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	n := ledger.Lanes(4)
	var mine, other string
	for i := 0; mine == "" || other == ""; i++ {
		tok := "f" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if n.Of(tok, "") == 1 && mine == "" {
			mine = tok
		} else if n.Of(tok, "") != 1 && other == "" {
			other = tok
		}
	}
	accepted := func(token, id string) projector.Entry {
		subj := ledger.LanePrefix(1) + token + "." + id
		ev := &pb.Event{EventId: "evt_" + id, Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: subj, ExecutionId: id, TimeUnixNano: time.Now().UnixNano(),
			Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: &pb.Execution{
				ExecutionId: id, IntentToken: token, State: pb.State_STATE_ACCEPTED, AcceptedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now()}}}}
		ledger.Seal(ev, nil)
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return projector.Entry{Subject: subj, Data: data, Time: time.Now()}
	}
	p := projector.New(ledger.LaneStream(1), nil, v, nil)
	p.SetLane(1, n)
	a, b := accepted(mine, "act_01M8RC0WVC1SVYYKBZ5A5NRX1Z"), accepted(other, "act_01M8RC0WVC1SVYYKBZ5A5NRX2Z")
	a.Seq, b.Seq = 1, 2
	if err := p.Apply(ctx, []projector.Entry{a, b}); err != nil {
		t.Fatal(err)
	}
	if h, err := v.Head(ctx, a.Subject); err != nil || h.Seq != 1 {
		t.Fatalf("the lane's own intent: %v %v", h, err)
	}
	if in, err := v.IntentRow(mine); err != nil || in.Seq != 1 {
		t.Fatalf("the lane's own intent row: %v %v", in, err)
	}
	if _, err := v.Head(ctx, b.Subject); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("another lane's intent folded: %v", err)
	}
	if _, err := v.IntentRow(other); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("another lane's intent row moved: %v", err)
	}
	if p.Quarantined() != 1 {
		t.Fatalf("quarantined %d, want 1", p.Quarantined())
	}
	if cp, err := v.Checkpoint(ledger.LaneStream(1)); err != nil || cp != 2 {
		t.Fatalf("checkpoint of lane 1: %d %v", cp, err)
	}
}
