package keeper

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// A budget event survives its stored form unchanged, every field of it.
func TestProtoRoundTrip(t *testing.T) {
	at := time.Date(2026, 7, 22, 10, 0, 0, 0, time.UTC)
	for _, e := range []budget.Event{
		{Kind: budget.Reserved, Account: "team-a", AccountVersion: 3, At: at, Currency: "EUR", Limit: 10000, LimitDigest: "sha256:ab",
			OperationKey: "op-1", RequestDigest: "hmac-sha256:cd", Amount: 1250, SpentSeen: 100, HeldSeen: 200, WithinLimit: true, Allowed: true,
			Remainder: 8450, HeldListSeen: []budget.Hold{{OperationKey: "op-0", RequestDigest: "d0", Amount: 200}},
			Override: &budget.Override{By: "ops-lead", Reason: "incident"}},
		{Kind: budget.Settled, Account: "team-a", AccountVersion: 4, At: at, OperationKey: "op-1", Amount: 1250,
			Evidence: &budget.Evidence{ExecutionID: "act_1", TargetStatus: 201, Note: "n"}},
		{Kind: budget.Released, Account: "team-a", AccountVersion: 5, At: at, OperationKey: "op-2"},
	} {
		got := FromProto(ToProto(e))
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
		}
		if EventType(e.Kind) == pb.EventType_EVENT_TYPE_UNSPECIFIED {
			t.Errorf("%s has no event type", e.Kind)
		}
	}
}

// A stored budget event is read only when it is whole: garbage, a broken
// hash, or an execution event are refused as corrupt.
func TestDecodeStoredRefuses(t *testing.T) {
	ev := &pb.Event{EventId: "evt_1", Type: pb.EventType_EVENT_TYPE_BUDGET_RELEASED, Subject: Subject("team-a"),
		Body: &pb.Event_BudgetChanged{BudgetChanged: ToProto(budget.Event{Kind: budget.Released, Account: "team-a", OperationKey: "op"})}}
	ledger.Seal(ev, nil)
	good, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, e, err := DecodeStored(good); err != nil || len(e) != 1 || e[0].OperationKey != "op" {
		t.Fatalf("a whole event: %+v %v", e, err)
	}
	tampered := proto.Clone(ev).(*pb.Event)
	tampered.GetBudgetChanged().Amount = 99
	bad, _ := proto.Marshal(tampered)
	other := &pb.Event{EventId: "evt_2", Type: pb.EventType_EVENT_TYPE_ACCEPTED, Subject: "pc.exec.f.act_1",
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{}}}
	ledger.Seal(other, nil)
	notBudget, _ := proto.Marshal(other)
	for name, data := range map[string][]byte{"garbage": []byte("\xff\xff\xff"), "tampered": bad, "not a budget event": notBudget} {
		if _, _, err := DecodeStored(data); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
