package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/proto"
)

var groupRun int64

type keyMap map[string][]ed25519.PublicKey

func (k keyMap) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return k[id], nil }

func groupEvents(t *testing.T, n int) []*pb.Event {
	t.Helper()
	groupRun++
	evs := make([]*pb.Event, n)
	for i := range evs {
		evs[i] = &pb.Event{EventId: fmt.Sprintf("evt_%d", i), Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: fmt.Sprintf("pc.exec.k%d.x", i), GatewayId: "gw-1", TimeUnixNano: groupRun<<20 + int64(i)}
		Seal(evs[i], nil)
	}
	return evs
}

// stored signs evs as one group and returns each event as a reader decodes
// it from the stored bytes.
func stored(t *testing.T, key ed25519.PrivateKey, evs []*pb.Event) []*pb.Event {
	t.Helper()
	hashes := make([][]byte, len(evs))
	for i, ev := range evs {
		hashes[i] = ev.GetHash()
	}
	gs := SignGroup(key, hashes)
	out := make([]*pb.Event, len(evs))
	for i, ev := range evs {
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = new(pb.Event)
		if err := proto.Unmarshal(AppendGroupSignature(data, gs, i), out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Every event of a group verifies by itself, online (CheckSigned) and
// offline (CheckSignature, always a full verify), for every group size
// and place in the tree; one signature covers the group.
func TestGroupSignatureVerifiesEventByEvent(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	keys := keyMap{"gw-1": {pub}}
	for _, n := range []int{1, 2, 3, 5, 8, 13, 64, 100} {
		got := stored(t, key, groupEvents(t, n))
		for i, ev := range got {
			if ev.GetGroupSize() != uint32(n) || ev.GetGroupIndex() != uint32(i) {
				t.Fatalf("n=%d event %d: group %d/%d", n, i, ev.GetGroupIndex(), ev.GetGroupSize())
			}
			if string(ev.GetSignature()) != string(got[0].GetSignature()) {
				t.Fatalf("n=%d: events of one group carry different signatures", n)
			}
			if err := CheckSignature(ev, pub); err != nil {
				t.Fatalf("n=%d event %d offline: %v", n, i, err)
			}
			ForgetOwnSignatures()
			if err := CheckSigned(ev, keys); err != nil {
				t.Fatalf("n=%d event %d: %v", n, i, err)
			}
		}
	}
}

// A changed event, a changed path, a moved index, a stripped group, an
// event of another group or another key: each fails on its own.
func TestGroupSignatureTamperedEventIsFlagged(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, other, _ := ed25519.GenerateKey(rand.Reader)
	keys := keyMap{"gw-1": {pub}}
	evs := stored(t, key, groupEvents(t, 7))
	for name, tamper := range map[string]func(ev *pb.Event){
		"content": func(ev *pb.Event) { ev.ExecutionId = "act_changed" },
		"content+rehash": func(ev *pb.Event) {
			sig, path, i, n := ev.Signature, ev.GroupPath, ev.GroupIndex, ev.GroupSize
			ev.ExecutionId = "act_changed"
			Seal(ev, ev.GetPrevHash())
			ev.Signature, ev.GroupPath, ev.GroupIndex, ev.GroupSize = sig, path, i, n
		},
		"path":     func(ev *pb.Event) { ev.GroupPath[0] = make([]byte, 32) },
		"short":    func(ev *pb.Event) { ev.GroupPath = ev.GroupPath[:len(ev.GroupPath)-1] },
		"index":    func(ev *pb.Event) { ev.GroupIndex = (ev.GroupIndex + 1) % ev.GroupSize },
		"size":     func(ev *pb.Event) { ev.GroupSize++ },
		"stripped": func(ev *pb.Event) { ev.GroupPath, ev.GroupIndex, ev.GroupSize = nil, 0, 0 },
		"other group": func(ev *pb.Event) {
			o := stored(t, key, groupEvents(t, 7))[ev.GroupIndex]
			ev.Signature = o.Signature
		},
	} {
		for i := range evs {
			ev := proto.Clone(evs[i]).(*pb.Event)
			tamper(ev)
			if err := CheckSigned(ev, keys); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s, event %d: CheckSigned = %v, want ErrCorrupt", name, i, err)
			}
			if err := CheckSignature(ev, pub); err == nil && name != "content" {
				t.Errorf("%s, event %d: offline check passed", name, i)
			}
		}
	}
	// A group signed by a key that is not enrolled for the writer.
	for i, ev := range stored(t, other, groupEvents(t, 3)) {
		if err := CheckSigned(ev, keys); !errors.Is(err, ErrCorrupt) {
			t.Errorf("foreign key, event %d: CheckSigned = %v, want ErrCorrupt", i, err)
		}
		if err := CheckSigned(ev, keyMap{"gw-1": {otherPub}}); err != nil {
			t.Errorf("event %d with its key enrolled: %v", i, err)
		}
	}
}

// A foreign event's signature is verified once: the verdict is
// remembered only for the key that verified it.
func TestVerifiedSignatureRememberedPerKey(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	ev := groupEvents(t, 1)[0]
	Sign(ev, key)
	ForgetOwnSignatures()
	if err := CheckSigned(ev, keyMap{"gw-1": {pub}}); err != nil {
		t.Fatal(err)
	}
	if !verified.made(ev.GetHash(), ev.GetSignature(), []ed25519.PublicKey{pub}) {
		t.Fatal("a verified signature is not remembered")
	}
	if err := CheckSigned(ev, keyMap{"gw-1": {otherPub}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("remembered verdict served for a key that is not enrolled: %v", err)
	}
}
