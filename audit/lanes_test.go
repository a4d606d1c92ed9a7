package audit

import (
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Events of a sharded ledger: each shard's stream in sequence order (even
// when a gateway's clock disagrees), the shards merged by event time.
func TestByStreamThenTime(t *testing.T) {
	ev := func(stream string, seq uint64, at int64) Stored {
		return Stored{Stream: stream, Seq: seq, Event: &pb.Event{EventId: stream + string(rune('0'+seq)), TimeUnixNano: at}}
	}
	in := []Stored{
		ev("S1", 2, 50), ev("S0", 7, 10), ev("S1", 1, 5), ev("S0", 9, 40), ev("S0", 8, 60), // S0's seq 8 has a late clock
	}
	got := byStreamThenTime(in)
	want := []string{"S11", "S07", "S12", "S08", "S09"} // S09 (time 40) waits behind S08: stream order stands
	for i, s := range got {
		if s.Event.GetEventId() != want[i] {
			t.Fatalf("order %d: %s, want %v", i, s.Event.GetEventId(), want)
		}
	}
}
