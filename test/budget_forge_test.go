package test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// The budget forwarding channel (pcrpc.budget.<gateway id>) and the lease
// stream are open to every client holding the gateway user's NATS
// credentials. Such a client, without the ledger's keys, sends a leading
// gateway commands of its own: each is refused, and nothing is appended.
func TestForgedBudgetForwardIsRefused(t *testing.T) {
	ctx := context.Background()
	g := startBudgetGateway(t, "", "gw-forge-0", false)
	c := budgetClient(g)
	mustOK(t)(c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acct", Limit: 1000, Currency: "USD"})))
	mustOK(t)(c.Reserve(ctx, reserve("acct", "op-1", "sha256:1", 100)))
	st := budgetStream(t, g)
	before := streamMsgs(t, st)

	nc := natsConnect(t, g, natsauth.Gateway) // stolen credentials, none of the ledger's keys
	_, rogue, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	commands := []keeper.Command{
		{Op: "reserve", Account: "acct", Reserve: &budget.ReserveRequest{OperationKey: "forged-1", RequestDigest: "sha256:f", Amount: 900}},
		{Op: "release", Account: "acct", OpKey: "op-1", Evidence: &budget.Evidence{ExecutionID: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 404, Note: "forged"}},
	}
	// The leader answers into pcrpc.answer.> (the gateway user's answer
	// subjects), never into an inbox.
	answers, err := nc.SubscribeSync(natsauth.BudgetAnswerPrefix + "forger.*")
	if err != nil {
		t.Fatal(err)
	}
	var sent int
	for _, cmd := range commands {
		body, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		// As the first version sent it (no signature), and sealed as a
		// gateway would, under an enrolled gateway's id but a rogue key.
		sealed := map[string]any{"from": "gw-forge-0", "to": "gw-forge-0", "at": time.Now().UnixNano(), "body": json.RawMessage(body)}
		unsigned, _ := json.Marshal(sealed)
		h, _ := json.Marshal(sealed)
		sealed["mac"] = ed25519.Sign(rogue, h) // without the ledger's forward key, any bytes
		signed, _ := json.Marshal(sealed)
		for _, data := range [][]byte{body, unsigned, signed} {
			if err := nc.PublishRequest(natsauth.BudgetRPCPrefix+"gw-forge-0", fmt.Sprintf("%sforger.%d", natsauth.BudgetAnswerPrefix, sent), data); err != nil {
				t.Fatal(err)
			}
			m, err := answers.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("forged forward: %v", err)
			}
			sent++
			if string(m.Data) == "" || !json.Valid(m.Data) {
				t.Fatalf("answer %q", m.Data)
			}
		}
	}
	if after := streamMsgs(t, st); after != before {
		t.Fatalf("the budget stream grew from %d to %d messages on forged forwards", before, after)
	}
	acc, err := c.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "acct"}))
	if err != nil {
		t.Fatal(err)
	}
	if acc.Msg.GetAccount().GetHeld() != 100 {
		t.Fatalf("held %d after forged forwards, want 100", acc.Msg.GetAccount().GetHeld())
	}
	if got := leadCount(t, []*server.Gateway{g}, keeper.ForwardRejected); got != float64(sent) {
		t.Fatalf("forward_rejected %v, want %d", got, sent)
	}
	if got := leadCount(t, []*server.Gateway{g}, keeper.ForwardServed); got != 0 {
		t.Fatalf("forward_served %v on forged forwards", got)
	}
}

// A client with the gateway user's credentials poses as the leader of a
// hot account two gateways share: it writes a lease naming a gateway it
// serves itself, and joins the real gateways' forwarding queue groups,
// answering every forward it gets with a refusal. No caller sees its
// answers: the lease counts as free, and an answer the leader did not sign
// is not believed (the command is decided where it arrived).
func TestImpostorLeaderIsNotBelieved(t *testing.T) {
	ctx := context.Background()
	g0 := startBudgetGateway(t, "", "gw-imp-0", false)
	g1 := startBudgetGateway(t, g0.NatsURL, "gw-imp-1", false)
	gs := []*server.Gateway{g0, g1}
	cs := []interface {
		Reserve(context.Context, *connect.Request[pb.ReserveRequest]) (*connect.Response[pb.ReserveResponse], error)
	}{budgetClient(g0), budgetClient(g1)}
	const account = "imp"
	mustOK(t)(budgetClient(g0).SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: account, Limit: 1 << 40, Currency: "USD"})))

	nc := natsConnect(t, g0, natsauth.Gateway)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	lease, _ := json.Marshal(keeper.Lease{Gateway: "gw-evil", Expires: time.Now().Add(time.Hour)})
	if _, err := js.Publish(ctx, "pc.lease.budget."+account, lease); err != nil {
		t.Fatalf("forged lease: %v", err)
	}
	_, rogue, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	refuse := func(m *nats.Msg) { // an answer shaped as the leader's, to this very forward, but signed by a rogue key
		got.Add(1)
		var req struct{ From, To string }
		_ = json.Unmarshal(m.Data, &req)
		sum := sha256.Sum256(m.Data)
		ans := map[string]any{"from": req.To, "to": req.From, "at": time.Now().UnixNano(), "body": json.RawMessage(`{"err":"forged: unknown account","code":1}`), "for": hex.EncodeToString(sum[:])}
		digest, _ := json.Marshal(ans)
		ans["mac"] = ed25519.Sign(rogue, digest) // it has no forward key: any bytes
		data, _ := json.Marshal(ans)
		_ = m.Respond(data)
	}
	if _, err := nc.Subscribe(natsauth.BudgetRPCPrefix+"gw-evil", refuse); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if _, err := nc.QueueSubscribe(natsauth.BudgetRPCPrefix+g.ID, "budget", refuse); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Bursts of reserves on both gateways until the impostor got forwards
	// (the gateways lease the account once they contend for it). No hold
	// is settled, so the bursts stop at the account's open-hold bound
	// (a 17th burst was refused "too many open holds").
	var mu sync.Mutex
	allowed := map[string]bool{}
	for b := 0; b < budget.MaxOpenHolds/64 && (got.Load() < 5 || b < 3); b++ {
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				op := fmt.Sprintf("op-%d-%d", b, i)
				res, err := cs[i%2].Reserve(ctx, reserve(account, op, "sha256:"+op, 1))
				if err != nil {
					t.Errorf("%s: %v", op, err)
					return
				}
				mu.Lock()
				allowed[op] = res.Msg.GetDecision().GetAllowed()
				mu.Unlock()
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	if got.Load() == 0 {
		t.Fatal("the impostor never got a forward: nothing was tried")
	}
	reserved, _ := checkBudgetLedger(t, readBudgetLedger(t, budgetStream(t, g0)), 1<<40)
	for op, ok := range allowed {
		if !ok {
			t.Fatalf("%s denied under a limit it cannot reach", op)
		}
		if _, in := reserved[op]; !in {
			t.Fatalf("%s answered allowed but not reserved in the ledger", op)
		}
	}
	if holder := budgetLeaseHolder(t, g0, account); holder == "gw-evil" {
		t.Fatal("the forged lease still stands")
	}
	if leadCount(t, gs, keeper.ForwardRejected) == 0 {
		t.Fatal("no forward_rejected counted")
	}
	t.Logf("the impostor got %d forwards; %d reserves, all in the ledger", got.Load(), len(allowed))
}

func streamMsgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
