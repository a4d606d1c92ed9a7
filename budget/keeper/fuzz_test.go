package keeper

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// FuzzDecodeStored: a budget message comes from the stream, where anyone
// who reaches NATS may have put it. Whatever its body (a single decision
// or a commit group) and type, decoding a sealed event never panics, and
// what it accepts is decisions of the event's own account, each of a known
// kind, a group never nested.
func FuzzDecodeStored(f *testing.F) {
	one := ToProto(budget.Event{Kind: budget.Reserved, Account: "team-a", OperationKey: "op-1", Amount: 5, Allowed: true, WithinLimit: true})
	group := &pb.BudgetDecision{Account: "team-a", Group: []*pb.BudgetDecision{one, ToProto(budget.Event{Kind: budget.Settled, Account: "team-a", OperationKey: "op-1", Amount: 5})}}
	for _, c := range []struct {
		t pb.EventType
		d *pb.BudgetDecision
	}{{pb.EventType_EVENT_TYPE_BUDGET_RESERVED, one}, {pb.EventType_EVENT_TYPE_BUDGET_GROUP, group}, {pb.EventType_EVENT_TYPE_BUDGET_GROUP, one}} {
		b, err := proto.Marshal(c.d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(int32(c.t), b)
	}
	f.Fuzz(func(t *testing.T, typ int32, body []byte) {
		d := new(pb.BudgetDecision)
		if proto.Unmarshal(body, d) != nil {
			return
		}
		ev := &pb.Event{EventId: "evt_f", Type: pb.EventType(typ), Subject: Subject(d.GetAccount()), Body: &pb.Event_BudgetChanged{BudgetChanged: d}}
		ledger.Seal(ev, nil)
		data, err := proto.Marshal(ev)
		if err != nil {
			return
		}
		_, got, err := DecodeStored(data)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatalf("a %v event decoded to no decision", ev.GetType())
		}
		if ev.GetType() == pb.EventType_EVENT_TYPE_BUDGET_GROUP {
			for _, m := range d.GetGroup() {
				if m.GetAccount() != d.GetAccount() || len(m.GetGroup()) > 0 {
					t.Fatalf("a group member of another account or nested was accepted: %v", m)
				}
			}
		}
		for _, e := range got {
			if e.Account != d.GetAccount() && ev.GetType() == pb.EventType_EVENT_TYPE_BUDGET_GROUP {
				t.Fatalf("decision of account %q in a group of %q", e.Account, d.GetAccount())
			}
		}
	})
}
