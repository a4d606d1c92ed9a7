package keeper

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// The budget events a keeper writes, one decision or a group, verify with
// its signing key (signed through a presigner, ledger.Presigner), and with
// a new SignKey the next ones verify with the new key only.
func TestPackedEventsVerify(t *testing.T) {
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	k := New(nil, nil, "gw-a", now)
	decs := func(n int) []*pb.BudgetDecision {
		var out []*pb.BudgetDecision
		for i := range n {
			out = append(out, &pb.BudgetDecision{Outcome: "allowed", Account: "acct", OperationKey: string(rune('a' + i)), Amount: 100, Currency: "EUR"})
		}
		return out
	}
	check := func(pub, other ed25519.PublicKey) {
		t.Helper()
		for _, n := range []int{1, 3} {
			for round := range presignRounds {
				msgs, _ := k.pack("acct", uint64(round+1), nil, decs(n), now())
				for _, m := range msgs {
					if err := ledger.CheckSignature(m.Event, pub); err != nil {
						t.Fatalf("%d decisions, round %d: %v", n, round, err)
					}
					if ledger.CheckSignature(m.Event, other) == nil {
						t.Fatalf("%d decisions, round %d: the event verifies with another key", n, round)
					}
				}
			}
		}
	}
	pub1, key1, _ := ed25519.GenerateKey(rand.Reader)
	pub2, key2, _ := ed25519.GenerateKey(rand.Reader)
	k.SignKey = key1
	check(pub1, pub2)
	k.SignKey = key2
	check(pub2, pub1)
}

// presignRounds signs more events than a presigner keeps nonces for, so
// both a pooled nonce and one made on the spot are used.
const presignRounds = 100
