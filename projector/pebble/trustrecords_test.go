package pebble

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"github.com/portcullis-dev/portcullis/trust"
	"google.golang.org/protobuf/proto"
)

// keyMap answers ledger.Keys from a map.
type keyMap map[string][]ed25519.PublicKey

func (k keyMap) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return k[id], nil }

// quarantinedRows lists the quarantine view.
func quarantinedRows(t *testing.T, v *Views) []*pb.Quarantined {
	t.Helper()
	qs, err := v.ListQuarantined(context.Background(), "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// heard collects what a projector's OnQuarantine hook hears.
type heard struct{ reasons []error }

func (h *heard) hear(_ string, reason error) { h.reasons = append(h.reasons, reason) }

// An enrollment record the ledger's root did not sign, and one that is not
// a signed record at all, are quarantined like a bad ledger event: a row
// of the quarantine view (stream, sequence, subject, reason, the gateway
// it claims), the projector's count and its hook; the root-signed record
// and the meta stream's other subjects are not.
func TestForgedEnrollmentIsQuarantined(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	_, root, _ := ed25519.GenerateKey(nil)
	_, rogueRoot, _ := ed25519.GenerateKey(nil)
	_, gw, _ := ed25519.GenerateKey(nil)
	rec := func(sr *pb.SignedRecord) []byte {
		b, err := proto.Marshal(sr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now()
	p := projector.NewEnrollments("PORTCULLIS_META", nil, v, root.Public().(ed25519.PublicKey), nil)
	var h heard
	p.OnQuarantine(h.hear)
	err := p.Apply(ctx, []projector.Entry{
		{Seq: 1, Subject: "pc.meta.root", Data: rec(trust.NewRoot(root, now))},
		{Seq: 2, Subject: "pc.meta.enroll.gw-1.aa", Data: rec(trust.EnrollSelf(root, gw, "gw-1", "", now))},
		{Seq: 4, Subject: "pc.meta.enroll.gw-evil.bb", Data: rec(trust.EnrollSelf(rogueRoot, gw, "gw-evil", "", now))},
		{Seq: 5, Subject: "pc.meta.session.cc", Data: []byte("gw-1 http://x")},
		{Seq: 7, Subject: "pc.meta.enroll.gw-2.dd", Data: []byte("\xff garbage")},
	})
	if err != nil {
		t.Fatal(err)
	}
	qs := quarantinedRows(t, v)
	if len(qs) != 2 || p.Quarantined() != 2 || v.QuarantinedTotal() != 2 || len(h.reasons) != 2 {
		t.Fatalf("quarantined %v (count %d, view %d, heard %d)", qs, p.Quarantined(), v.QuarantinedTotal(), len(h.reasons))
	}
	forged, garbage := qs[0], qs[1]
	if forged.GetStream() != "PORTCULLIS_META" || forged.GetSeq() != 4 || forged.GetSubject() != "pc.meta.enroll.gw-evil.bb" ||
		forged.GetGatewayId() != "gw-evil" || !strings.Contains(forged.GetReason(), "not signed by the ledger's root key") ||
		!errors.Is(h.reasons[0], ledger.ErrBadSignature) {
		t.Fatalf("forged enrollment: %v (%v)", forged, h.reasons[0])
	}
	if garbage.GetSeq() != 7 || garbage.GetSubject() != "pc.meta.enroll.gw-2.dd" || !errors.Is(h.reasons[1], ledger.ErrUndecodable) {
		t.Fatalf("garbage enrollment: %v (%v)", garbage, h.reasons[1])
	}
	if m, err := v.Mark("PORTCULLIS_META"); err != nil || m.Seq != 7 {
		t.Fatalf("mark %v %v", m, err)
	}
}

// checkpointSubject is where the test's checkpoints of a stream go.
func checkpointSubject(stream string) string { return "pc.audit." + stream }

// A forged checkpoint (signed by a key its claimed writer is not enrolled
// with), a garbage message, a checkpoint of another stream and a replayed
// old checkpoint on pc.audit.* are quarantined; the chain goes on from the
// last valid checkpoint, also across a restart of the projector, so the
// genuine checkpoints after them are not.
func TestForgedCheckpointIsQuarantined(t *testing.T) {
	dir := t.TempDir()
	v, err := Open(dir) // closed to restart below
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	_, rogue, _ := ed25519.GenerateKey(nil)
	keys := keyMap{"gw-1": {key.Public().(ed25519.PublicKey)}}
	const subj = "pc.audit.PORTCULLIS_EXECUTIONS"
	n := 0
	cp := func(prev *pb.Event, stream string, signer ed25519.PrivateKey) (*pb.Event, []byte) {
		n++
		ev := &pb.Event{EventId: "evt_" + string(rune('a'+n)), Type: pb.EventType_EVENT_TYPE_CHECKPOINT, Subject: subj, GatewayId: "gw-1", TimeUnixNano: int64(n),
			Body: &pb.Event_Checkpoint{Checkpoint: &pb.Checkpoint{Stream: stream, LastSeq: uint64(n), RunningDigest: make([]byte, 32)}}}
		ledger.Seal(ev, prev.GetHash())
		ledger.Sign(ev, signer)
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return ev, b
	}
	const exec = ledger.ExecutionsStream
	c1, d1 := cp(nil, exec, key)
	c2, d2 := cp(c1, exec, key)
	_, forged := cp(c2, exec, rogue)
	_, other := cp(c2, "PORTCULLIS_BUDGET", key)
	c3, d3 := cp(c2, exec, key)
	open := func(v *Views) (*projector.Projector, *heard) {
		p := projector.NewCheckpoints("PORTCULLIS_AUDIT", checkpointSubject, nil, v, nil)
		p.SetKeys(keys)
		h := &heard{}
		p.OnQuarantine(h.hear)
		return p, h
	}
	p, h := open(v)
	if err := p.Apply(ctx, []projector.Entry{
		{Seq: 1, Subject: subj, Data: d1}, {Seq: 2, Subject: subj, Data: d2}, {Seq: 3, Subject: subj, Data: forged},
		{Seq: 4, Subject: subj, Data: []byte("garbage")}, {Seq: 5, Subject: subj, Data: other}, {Seq: 6, Subject: subj, Data: d3},
	}); err != nil {
		t.Fatal(err)
	}
	if p.Quarantined() != 3 || len(h.reasons) != 3 {
		t.Fatalf("quarantined %d: %v", p.Quarantined(), quarantinedRows(t, v))
	}
	for i, want := range []error{ledger.ErrBadSignature, ledger.ErrUndecodable, ledger.ErrCorrupt} {
		if !errors.Is(h.reasons[i], want) {
			t.Fatalf("reason %d: %v, want %v", i, h.reasons[i], want)
		}
	}
	if l, err := v.Link(subj); err != nil || l.Seq != 6 || string(l.Hash) != string(c3.GetHash()) {
		t.Fatalf("link %v %v", l, err)
	}
	// Restarted: the chain goes on from the stored link; a replayed old
	// checkpoint is quarantined, the next genuine one is not.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = reopenViews(t, dir) // closed when the test ends
	p, _ = open(v)
	_, d4 := cp(c3, exec, key)
	if err := p.Apply(ctx, []projector.Entry{{Seq: 7, Subject: subj, Data: d2}, {Seq: 8, Subject: subj, Data: d4}}); err != nil {
		t.Fatal(err)
	}
	qs := quarantinedRows(t, v)
	if p.Quarantined() != 1 || len(qs) != 4 || qs[3].GetSeq() != 7 || !strings.Contains(qs[3].GetReason(), "chain broken") {
		t.Fatalf("after restart: quarantined %d: %v", p.Quarantined(), qs)
	}
	for i, want := range []uint64{3, 4, 5, 7} {
		if q := qs[i]; q.GetSeq() != want || q.GetStream() != "PORTCULLIS_AUDIT" || q.GetSubject() != subj {
			t.Fatalf("row %d: %v", i, q)
		}
	}
	if v.QuarantinedTotal() != 4 {
		t.Fatalf("view holds %d", v.QuarantinedTotal())
	}
}
