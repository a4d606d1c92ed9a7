package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/server"
)

// BenchmarkReserve: durable reservations through two gateways sharing one
// ledger, 64 callers, on one hot account (every decision contends for one
// subject) and spread over 1 000 accounts.
func BenchmarkReserve(b *testing.B) {
	for _, accounts := range []int{1, 1000} {
		b.Run(fmt.Sprintf("accounts=%d", accounts), func(b *testing.B) {
			g1 := benchGateway(b)
			g2, err := server.Start(context.Background(), server.Options{
				DataDir: b.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(b), FingerprintKey: testKey,
				NatsURL: g1.NatsURL, NatsCreds: credsFor(b, g1.NatsURL), GatewayID: "gw-bench-2", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RootKey: g1.RootKeyPath,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { g2.Close(context.Background()) })
			ks := []*server.Gateway{g1, g2}
			for a := range accounts {
				if _, err := g1.Keeper.SetLimit(context.Background(), budget.Limit{Account: fmt.Sprintf("acct-%d", a), Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
			// One operation: a reservation, then its settlement (two durable
			// decisions), so the open holds of the hot account stay bounded.
			runCallers(b, 64, func(c, i int) error {
				k, acct, op := ks[c%2].Keeper, fmt.Sprintf("acct-%d", i%accounts), fmt.Sprintf("op-%d", i)
				_, d, err := k.Reserve(context.Background(), acct, budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:x", Amount: 100})
				if err == nil && d.Outcome != budget.OutcomeHeld {
					err = fmt.Errorf("outcome %s", d.Outcome)
				}
				if err == nil {
					_, err = k.Settle(context.Background(), acct, op, 100, budget.Evidence{ExecutionID: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: "200"})
				}
				return err
			})
		})
	}
}

// BenchmarkWithinLimitCheck: read an account from the views and decide a
// reservation on it (no append): the check a caller can make before asking.
func BenchmarkWithinLimitCheck(b *testing.B) {
	g := benchGateway(b)
	ctx := context.Background()
	c := budgetClient(g)
	if _, err := c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})); err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.Reserve(ctx, reserve("acme", fmt.Sprintf("op-%d", i), "sha256:x", 100)); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h, err := g.Views.Account(ctx, "acme")
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := budget.Reserve(h.Account, budget.ReserveRequest{OperationKey: "op-new", RequestDigest: "sha256:y", Amount: 100}, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
