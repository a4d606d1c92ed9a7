package pebble

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// A decision row holds the event's hash, not the event: a list reads each
// event back from the budget stream and serves it only when it is the one
// folded. A row written before (the whole stored event) still reads
// without the stream.
func TestDecisionRowsReadBackFromTheStream(t *testing.T) {
	ctx := context.Background()
	v, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	decision := func(op string, seq byte) *pb.Event {
		return &pb.Event{
			Type: keeper.EventType(budget.Reserved), Hash: bytes.Repeat([]byte{seq}, 32),
			Body: &pb.Event_BudgetChanged{BudgetChanged: &pb.BudgetDecision{
				Outcome: string(budget.Reserved), Account: "acme", OperationKey: op, Amount: 100,
				HeldListSeen: []*pb.Hold{{OperationKey: "op-open", Amount: 7}},
			}},
		}
	}
	stream := map[uint64]*pb.Event{1: decision("op-1", 1), 2: decision("op-2", 2)}
	acct := map[string]keeper.Head{"acme": {Seq: 2, Hash: stream[2].GetHash(), Account: &budget.Account{Name: "acme"}}}
	rows := []projector.BudgetRow{{Seq: 1, Account: "acme", Hash: stream[1].GetHash()}, {Seq: 2, Account: "acme", Hash: stream[2].GetHash()}}
	if err := v.WriteBudget(acct, rows, nil, projector.Mark{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	row, closer, err := v.db.Get(decisionKey("acme", 2))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(row, stream[2].GetHash()) {
		t.Fatalf("decision row holds %d bytes, want the event's 32-byte hash", len(row))
	}
	closer.Close()

	if _, _, err := v.ListDecisions(ctx, "acme", 0, 10); err == nil {
		t.Fatal("a list read without the budget stream")
	}
	reads := 0
	v.ReadBudgetFrom(func(_ context.Context, seq uint64) (*pb.Event, error) {
		reads++
		if ev, ok := stream[seq]; ok {
			return ev, nil
		}
		return nil, ledger.ErrNotFound
	})
	ds, next, err := v.ListDecisions(ctx, "acme", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].GetOperationKey() != "op-2" || ds[0].GetStreamSeq() != 2 || len(ds[0].GetHeldListSeen()) != 1 || next != 2 || reads != 1 {
		t.Fatalf("first page: %v next %d after %d reads", ds, next, reads)
	}
	if ds, _, err = v.ListDecisions(ctx, "acme", next, 1); err != nil || len(ds) != 1 || ds[0].GetOperationKey() != "op-1" {
		t.Fatalf("second page: %v, %v", ds, err)
	}

	// The stream holds another event at seq 2 than the one folded (a views
	// directory of another ledger, a stream made anew): refused.
	stream[2] = decision("op-forged", 9)
	if _, _, err := v.ListDecisions(ctx, "acme", 0, 10); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("another event at the row's seq: %v, want ErrCorrupt", err)
	}
	delete(stream, 2) // gone from the stream (it denies delete and purge): damage, not "not found"
	if _, _, err := v.ListDecisions(ctx, "acme", 0, 10); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("the row's event missing from the stream: %v, want ErrCorrupt", err)
	}
	stream[2] = decision("op-2", 2)

	// A row of the earlier layout, the whole stored event, reads as before.
	old, err := proto.Marshal(decision("op-0", 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.db.Set(decisionKey("acme", 0), old, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	reads = 0
	ds, _, err = v.ListDecisions(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 || ds[2].GetOperationKey() != "op-0" || reads != 2 {
		t.Fatalf("with a row of the earlier layout: %v after %d reads", ds, reads)
	}
}
