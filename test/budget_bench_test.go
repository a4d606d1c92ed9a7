package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/server"
)

// benchKeepers starts two gateways on one ledger and returns their keepers.
func benchKeepers(b *testing.B) []*keeper.Keeper {
	g1 := benchGateway(b)
	g2, err := server.Start(context.Background(), server.Options{
		DataDir: b.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(b), FingerprintKey: testKey,
		NatsURL: g1.NatsURL, NatsCreds: credsFor(b, g1.NatsURL), GatewayID: "gw-bench-2", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RootKey: g1.RootKeyPath,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g2.Close(context.Background()) })
	return []*keeper.Keeper{g1.Keeper, g2.Keeper}
}

// reserveSettle is one operation: a reservation, then its settlement (two
// durable decisions), so the open holds stay bounded and each operation
// leaves one closed operation on its account.
func reserveSettle(k *keeper.Keeper, acct, op string) error {
	_, d, err := k.Reserve(context.Background(), acct, budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:x", Amount: 100})
	if err == nil && d.Outcome != budget.OutcomeHeld {
		err = fmt.Errorf("outcome %s", d.Outcome)
	}
	if err == nil {
		_, err = k.Settle(context.Background(), acct, op, 100, budget.Evidence{ExecutionID: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200})
	}
	return err
}

// BenchmarkReserve: reserve+settle operations (reported as ops/s, each two
// durable decisions) through two gateways sharing one ledger, 64 callers,
// spread over 1 000 accounts (each account's history stays small).
func BenchmarkReserve(b *testing.B) {
	const accounts = 1000
	ks := benchKeepers(b)
	for a := range accounts {
		if _, err := ks[0].SetLimit(context.Background(), budget.Limit{Account: fmt.Sprintf("acct-%d", a), Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	pfx := nuid.Next()
	runCallersUnit(b, 64, "ops/s", func(c, i int) error {
		return reserveSettle(ks[c%2], fmt.Sprintf("acct-%d", i%accounts), fmt.Sprintf("%s-%d", pfx, i))
	})
}

// hotOps bounds the operations BenchmarkHotAccount times, whatever
// -benchtime asks: each one adds a closed operation to the account, and
// the point is the cost at a given history.
const hotOps = 500

// BenchmarkHotAccount: one account, two gateways, 64 callers; the account
// first gets closed operations (1 000, or 50 000 without -short), then
// at most hotOps reserve+settle operations are timed. Reports ops/s and
// the history before and after.
func BenchmarkHotAccount(b *testing.B) {
	for _, closed := range []int{1000, 50000} {
		b.Run(fmt.Sprintf("closed=%d", closed), func(b *testing.B) {
			if closed > 1000 && testing.Short() {
				b.Skip("-short")
			}
			ks := benchKeepers(b)
			if _, err := ks[0].SetLimit(context.Background(), budget.Limit{Account: "hot", Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}); err != nil {
				b.Fatal(err)
			}
			pre := nuid.Next()
			if err := parallelOps(64, closed, func(c, i int) error { return reserveSettle(ks[c%2], "hot", fmt.Sprintf("%s-%d", pre, i)) }); err != nil {
				b.Fatal(err)
			}
			n := min(b.N, hotOps)
			pfx := nuid.Next()
			var next atomic.Int64
			lat := make([][]time.Duration, 64)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for c := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
						t0 := time.Now()
						if err := reserveSettle(ks[c%2], "hot", fmt.Sprintf("%s-%d", pfx, i)); err != nil {
							b.Error(err)
							return
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			reportLatency(b, elapsed, "ops/s", slices.Concat(lat...))
			b.ReportMetric(float64(closed), "closed-before")
			b.ReportMetric(float64(closed+n), "closed-after")
		})
	}
}

// parallelOps runs n calls of op on workers goroutines (setup).
func parallelOps(workers, n int, op func(c, i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for c := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := op(c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
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

// BenchmarkListDecisions: one page of an account's decision list as the
// console's account page asks for it (200 decisions), over Connect, after
// 64 callers' reserve+settle operations left each decision a held list of
// up to 64 holds. Each decision is read back from the budget stream.
func BenchmarkListDecisions(b *testing.B) {
	g := benchGateway(b)
	ctx := context.Background()
	if _, err := g.Keeper.SetLimit(ctx, budget.Limit{Account: "listed", Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}); err != nil {
		b.Fatal(err)
	}
	if err := parallelOps(64, 256, func(_, i int) error { return reserveSettle(g.Keeper, "listed", fmt.Sprintf("op-%d", i)) }); err != nil {
		b.Fatal(err)
	}
	c := budgetClient(g)
	req := connect.NewRequest(&pb.ListDecisionsRequest{Account: "listed", PageSize: 200})
	b.ResetTimer()
	for b.Loop() {
		res, err := c.ListDecisions(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(res.Msg.GetDecisions()); n < 200 {
			b.Fatalf("a page of %d decisions, want 200", n)
		}
	}
}
