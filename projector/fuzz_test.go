package projector

import (
	"context"
	"errors"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// memStore is a fake Store for pure-logic tests of the fold.
type memStore struct {
	cp          uint64
	heads       map[string]ledger.Head
	intents     map[string]Intent
	quarantined []*pb.Quarantined
	failWrite   error // the next Write fails with it
}

func newMemStore() *memStore {
	return &memStore{heads: map[string]ledger.Head{}, intents: map[string]Intent{}}
}

func (m *memStore) Checkpoint(string) (uint64, error) { return m.cp, nil }

func (m *memStore) Mark(string) (Mark, error) { return Mark{Seq: m.cp}, nil }

func (m *memStore) Write(_ string, rows []Row, intents map[string]Intent, q []*pb.Quarantined, mark Mark) error {
	if err := m.failWrite; err != nil {
		m.failWrite = nil
		return err
	}
	cp := mark.Seq
	m.quarantined = append(m.quarantined, q...)
	for _, r := range rows {
		m.heads[r.Subject] = ledger.Head{Seq: r.Seq, Event: r.Event}
	}
	for k, v := range intents {
		m.intents[k] = v
	}
	m.cp = cp
	return nil
}

func (m *memStore) Head(_ context.Context, subject string) (ledger.Head, error) {
	h, ok := m.heads[subject]
	if !ok {
		return ledger.Head{}, ledger.ErrNotFound
	}
	return h, nil
}

func (m *memStore) IntentRow(token string) (Intent, error) {
	in, ok := m.intents[token]
	if !ok {
		return Intent{}, ledger.ErrNotFound
	}
	return in, nil
}

const testID = "act_01J4K8J7DX7V0000000000000Z"

func accepted(t testing.TB) []byte {
	x := &pb.Execution{ExecutionId: testID, IntentToken: "ftok", State: pb.State_STATE_ACCEPTED,
		RetryClass: pb.RetryClass_RETRY_CLASS_STATUS_QUERY, AcceptedAt: timestamppb.Now()}
	ev := &pb.Event{EventId: "evt_1", Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: ledger.ExecutionSubject("ftok", testID),
		ExecutionId: testID, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x}}}
	ledger.Seal(ev, nil)
	b, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A quarantined message counts once the quarantine view holds it: not while
// its batch is folded, not twice when a failed write folds it again.
func TestQuarantineCountedOnceWritten(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	p := New("S", nil, st, nil)
	heard := 0
	p.OnQuarantine(func(string, error) { heard++ })
	subj := ledger.ExecutionSubject("ftok", testID)
	if err := p.Apply(ctx, []Entry{{Seq: 1, Subject: subj, Data: accepted(t)}}); err != nil {
		t.Fatal(err)
	}
	replay := []Entry{{Seq: 2, Subject: subj, Data: accepted(t)}} // breaks the chain
	st.failWrite = errors.New("disk full")
	if err := p.Apply(ctx, replay); err == nil {
		t.Fatal("the failed write went unreported")
	}
	if p.Quarantined() != 0 || heard != 0 || len(st.quarantined) != 0 {
		t.Fatalf("counted %d (heard %d) with %d in the view", p.Quarantined(), heard, len(st.quarantined))
	}
	if err := p.Apply(ctx, replay); err != nil {
		t.Fatal(err)
	}
	if p.Quarantined() != 1 || heard != 1 || len(st.quarantined) != 1 {
		t.Fatalf("after the write: counted %d (heard %d) with %d in the view", p.Quarantined(), heard, len(st.quarantined))
	}
}

func TestApplyFoldsAndRefusesCorruption(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	p := New("S", nil, st, nil)
	subj := ledger.ExecutionSubject("ftok", testID)
	if err := p.Apply(ctx, []Entry{{Seq: 1, Subject: subj, Data: accepted(t)}}); err != nil {
		t.Fatal(err)
	}
	if st.cp != 1 || st.intents["ftok"].LatestSubject != subj {
		t.Fatalf("fold: checkpoint %d, intent %+v", st.cp, st.intents["ftok"])
	}
	// The same event again breaks the chain: it is quarantined, the fold
	// goes on past it, the head stays the valid event with the subject's
	// real last sequence.
	if err := p.Apply(ctx, []Entry{{Seq: 2, Subject: subj, Data: accepted(t)}}); err != nil {
		t.Fatal(err)
	}
	if st.cp != 2 || len(st.quarantined) != 1 || st.quarantined[0].GetSeq() != 2 || p.Quarantined() != 1 {
		t.Fatalf("replayed event: checkpoint %d, quarantined %v", st.cp, st.quarantined)
	}
	if h := st.heads[subj]; h.Seq != 2 || h.Event.GetEventId() != "evt_1" || st.intents["ftok"].Seq != 2 {
		t.Fatalf("head after quarantine: %+v, intent %+v", h, st.intents["ftok"])
	}
	// A byte changed in the payload is detected.
	b := accepted(t)
	b[len(b)/2] ^= 0x01
	fresh := newMemStore()
	if err := New("S", nil, fresh, nil).Apply(ctx, []Entry{{Seq: 1, Subject: subj, Data: b}}); err != nil || len(fresh.heads) != 0 || len(fresh.quarantined) != 1 {
		t.Fatalf("tampered event: %v, heads %v", err, fresh.heads)
	}
}

// FuzzApply: whatever bytes the stream holds, the fold never panics and
// either folds the event or quarantines it; it always moves on.
func FuzzApply(f *testing.F) {
	f.Add(accepted(f), "pc.exec.ftok."+testID)
	f.Add([]byte("garbage"), "pc.exec.x.y")
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		st := newMemStore()
		err := New("S", nil, st, nil).Apply(context.Background(), []Entry{{Seq: 1, Subject: subject, Data: data}})
		if err != nil || st.cp != 1 {
			t.Fatalf("the fold stopped: %v, checkpoint %d", err, st.cp)
		}
		if len(st.heads) == 0 && len(st.quarantined) != 1 {
			t.Fatal("an event neither folded nor quarantined")
		}
	})
}
