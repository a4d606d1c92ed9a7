package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func encodedEvents() []*pb.Event {
	x := &pb.Execution{ExecutionId: "act_01JXAMPLE", Tool: "create_payment", CanonicalRecord: `{"a":1}`, AcceptedAt: timestamppb.Now()}
	return []*pb.Event{
		{},
		{EventId: "evt_1"},
		{EventId: "evt_2", Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: "pc.exec.fab.act_01JXAMPLE", ExecutionId: x.ExecutionId, TimeUnixNano: 42, GatewayId: "gw-1",
			Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Evidence: "e"}}},
		{EventId: "evt_4", GatewayId: "gw-1", Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{}}},
	}
}

// SealEncoded seals as Seal does and returns what proto.Marshal gives for
// the sealed event, byte for byte.
func TestSealEncodedIsTheMarshalledEvent(t *testing.T) {
	for i, ev := range encodedEvents() {
		for _, prev := range [][]byte{nil, bytes.Repeat([]byte{7}, 32)} {
			want := proto.Clone(ev).(*pb.Event)
			want.Signature = []byte("stale")
			Seal(want, prev)
			got := proto.Clone(ev).(*pb.Event)
			got.Signature = []byte("stale")
			data := SealEncoded(got, prev)
			if !proto.Equal(got, want) {
				t.Fatalf("event %d: SealEncoded sealed %v, Seal %v", i, got, want)
			}
			m, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, m) {
				t.Fatalf("event %d: encoding\n%x\nwant\n%x", i, data, m)
			}
		}
	}
}

// The projector's hash check from the stored bytes accepts a group-signed
// event as stored, and a changed one fails whether or not its bytes are
// the ones hashed.
func TestCheckSignedDataFromStoredBytes(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	keys := keyMap{"gw-1": {pub}}
	for i, ev := range encodedEvents()[2:] {
		data := SealEncoded(ev, nil)
		gs := SignGroup(key, [][]byte{ev.GetHash(), bytes.Repeat([]byte{1}, 32)})
		data = AppendGroupSignature(data, gs, 0)
		dec := new(pb.Event)
		if err := proto.Unmarshal(data, dec); err != nil {
			t.Fatal(err)
		}
		if err := CheckSignedData(dec, data, keys); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		// The same event in another field order (event_id last: the
		// stored bytes are not the hashed ones) verifies through the
		// re-marshal.
		moved := append(withoutFields(t, data, 1, 1), withoutFields(t, data, 2, 1<<29-1)...)
		moved = withoutFields(t, moved, 9, 12)
		moved = AppendGroupSignature(moved, gs, 0)
		if sum, _ := hashedSum(moved); bytes.Equal(sum[:], ev.GetHash()) {
			t.Fatal("reordering did nothing")
		}
		dec = new(pb.Event)
		if err := proto.Unmarshal(moved, dec); err != nil {
			t.Fatal(err)
		}
		if err := CheckSignedData(dec, moved, keys); err != nil {
			t.Fatalf("event %d reordered: %v", i, err)
		}
		// One of the fields outside the hash with another wire type is an
		// unknown field to the decoder, which the re-marshal hashes: it
		// fails as it did before the check on stored bytes.
		for _, num := range []protowire.Number{8, 9, 10, 11, 12} {
			odd := protowire.AppendTag(bytes.Clone(data), num, protowire.Fixed32Type)
			odd = protowire.AppendFixed32(odd, 7)
			dec = new(pb.Event)
			if err := proto.Unmarshal(odd, dec); err != nil {
				t.Fatal(err)
			}
			if err := CheckSignedData(dec, odd, keys); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("event %d, field %d as fixed32: %v, want ErrCorrupt", i, num, err)
			}
			if err := CheckSigned(dec, keys); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("event %d, field %d as fixed32, re-marshalled: %v, want ErrCorrupt", i, num, err)
			}
		}
		// A changed event, stored as such, fails.
		changed := proto.Clone(dec).(*pb.Event)
		changed.TimeUnixNano++
		bad, err := proto.Marshal(changed)
		if err != nil {
			t.Fatal(err)
		}
		dec = new(pb.Event)
		if err := proto.Unmarshal(bad, dec); err != nil {
			t.Fatal(err)
		}
		if err := CheckSignedData(dec, bad, keys); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("event %d changed: %v, want ErrCorrupt", i, err)
		}
	}
}

// withoutFields is data without its top-level fields lo to hi.
func withoutFields(t *testing.T, data []byte, lo, hi protowire.Number) []byte {
	t.Helper()
	var out []byte
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		m := protowire.ConsumeFieldValue(num, typ, data[off+n:])
		if n < 0 || m < 0 {
			t.Fatal("bad encoding")
		}
		if num < lo || num > hi {
			out = append(out, data[off:off+n+m]...)
		}
		off += n + m
	}
	return out
}
