package jetstream

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

type testKeys map[string][]ed25519.PublicKey

func (k testKeys) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return k[id], nil }

// With GroupSignKey, concurrent decisions are signed once per commit group,
// and every stored event verifies by itself: online after this process
// forgot its signatures, offline with a full verify; an event that was
// already signed keeps its own signature.
func TestGroupSignedAppendsVerifyEventByEvent(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	l := openTestLog(t, Options{GroupSignKey: key, Keys: testKeys{"gw-1": {pub}}})
	const callers, each = 32, 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				subj := fmt.Sprintf("t.g.%d.%d", c, i)
				ev := testEvent(subj, nil)
				ev.GatewayId = "gw-1"
				ledger.Seal(ev, nil)
				if c == 0 && i == 0 {
					ledger.Sign(ev, key) // signed by its writer: left alone
				}
				if _, err := l.Append(context.Background(), ledger.Message{Subject: subj, Event: ev}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ledger.ForgetOwnSignatures()
	sigs := map[string]int{}
	for c := range callers {
		for i := range each {
			subj := fmt.Sprintf("t.g.%d.%d", c, i)
			m, err := l.Stream().GetLastMsgForSubject(context.Background(), subj)
			if err != nil {
				t.Fatal(err)
			}
			ev := new(pb.Event)
			if err := proto.Unmarshal(m.Data, ev); err != nil {
				t.Fatal(err)
			}
			if c == 0 && i == 0 {
				if ev.GetGroupSize() != 0 {
					t.Fatalf("a signed event got a group signature")
				}
			} else if ev.GetGroupSize() == 0 {
				t.Fatalf("%s: no group signature", subj)
			}
			sigs[string(ev.GetSignature())]++
			if err := ledger.CheckSignature(ev, pub); err != nil {
				t.Fatalf("%s offline: %v", subj, err)
			}
			if _, err := l.Last(context.Background(), subj); err != nil {
				t.Fatalf("%s read: %v", subj, err)
			}
		}
	}
	t.Logf("%d events, %d signatures", callers*each, len(sigs))
	if len(sigs) >= callers*each {
		t.Fatalf("every event has a signature of its own (%d): no group was signed once", len(sigs))
	}
}

// A group-signed event whose content changes after it was stored is not
// served: its hash no longer matches, and a re-hashed copy no longer
// verifies against the group's root.
func TestGroupSignedEventTamperedIsRefused(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	l := openTestLog(t, Options{GroupSignKey: key, Keys: testKeys{"gw-1": {pub}}})
	ev := testEvent("t.h.1", nil)
	ev.GatewayId = "gw-1"
	ledger.Seal(ev, nil)
	if _, err := l.Append(context.Background(), ledger.Message{Subject: "t.h.1", Event: ev}); err != nil {
		t.Fatal(err)
	}
	m, err := l.Stream().GetLastMsgForSubject(context.Background(), "t.h.1")
	if err != nil {
		t.Fatal(err)
	}
	stored := new(pb.Event)
	if err := proto.Unmarshal(m.Data, stored); err != nil {
		t.Fatal(err)
	}
	stored.ExecutionId = "act_forged"
	sig, path, idx, size := stored.Signature, stored.GroupPath, stored.GroupIndex, stored.GroupSize
	ledger.Seal(stored, nil)
	stored.Signature, stored.GroupPath, stored.GroupIndex, stored.GroupSize = sig, path, idx, size
	data, _ := proto.Marshal(stored)
	if _, err := l.check("t.h.1", data); err == nil {
		t.Fatal("a re-hashed event passed its group signature")
	}
}

// At serves the event stored at a sequence only when it verifies, as Last
// does: a message there from a key that is not enrolled is refused, and a
// sequence the stream does not hold is ErrNotFound.
func TestAtReadsAVerifiedEvent(t *testing.T) {
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	l := openTestLog(t, Options{GroupSignKey: key, Keys: testKeys{"gw-1": {pub}}})
	ev := testEvent("t.at", nil)
	ev.GatewayId = "gw-1"
	ledger.Seal(ev, nil)
	seqs, err := l.Append(ctx, ledger.Message{Subject: "t.at", Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.At(ctx, seqs[0])
	if err != nil || string(got.GetHash()) != string(ev.GetHash()) || got.GetSubject() != "t.at" {
		t.Fatalf("At(%d) = %v, %v; want the appended event", seqs[0], got, err)
	}

	_, rogue, _ := ed25519.GenerateKey(rand.Reader)
	forged := testEvent("t.forged", nil)
	forged.GatewayId = "gw-1"
	ledger.Seal(forged, nil)
	ledger.Sign(forged, rogue)
	ack, err := l.js.Publish(ctx, "t.forged", mustMarshal(t, forged))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l.At(ctx, ack.Sequence); err == nil || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("At of an event signed by a key not enrolled = %v, %v; want it refused", got, err)
	}
	if _, err := l.At(ctx, ack.Sequence+10); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("At past the stream's end: %v, want ErrNotFound", err)
	}
}
