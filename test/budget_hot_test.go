package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
	"github.com/portcullis-dev/portcullis/server"
)

// startGatewayID is startGateway joined to natsURL under its own gateway
// id (the account leases tell gateways apart by id).
func startGatewayID(t testing.TB, natsURL, id string) *server.Gateway {
	t.Helper()
	return startBudgetGateway(t, natsURL, id, false)
}

// startBudgetGateway is startGateway with a gateway id (natsURL "": the
// embedded default) and, with noLead, without account leases.
func startBudgetGateway(t testing.TB, natsURL, id string, noLead bool) *server.Gateway {
	t.Helper()
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: natsURL, NatsListen: "127.0.0.1:-1",
		FingerprintKey: testKey, GatewayID: id, NoBudgetLead: noLead, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if natsURL != "" {
		o.NatsListen, o.RootKey, o.NatsCreds = "", rootKeyOf(natsURL), credsFor(t, natsURL)
	}
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	remember(g)
	t.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

// budgetLedger is what the budget stream holds, decision by decision.
type budgetLedger struct {
	events []budget.Event
	groups int // commit group messages (several decisions in one)
}

func readBudgetLedger(t testing.TB, s jetstream.Stream) budgetLedger {
	t.Helper()
	var out budgetLedger
	err := ljs.Source{Stream: s}.ReadAll(context.Background(), func(e projector.Entry) error {
		ev, es, err := keeper.DecodeStored(e.Data)
		if err != nil {
			return err
		}
		if ev.GetType() == pb.EventType_EVENT_TYPE_BUDGET_GROUP {
			out.groups++
		}
		out.events = append(out.events, es...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkBudgetLedger checks the budget rule over the whole stream: the
// verifier finds nothing, every operation key is reserved at most once (a
// hold never counted twice; a denial holds nothing, so a retry of a denied
// operation is decided again) and settled at most once, and what was
// allowed is within the limit.
func checkBudgetLedger(t testing.TB, l budgetLedger, limit int64) (reserved, settled map[string]int64) {
	t.Helper()
	if fs := problems(budget.Verify(l.events)); len(fs) != 0 {
		t.Fatalf("verifier: %d findings, first %+v", len(fs), fs[0])
	}
	reserved, settled = map[string]int64{}, map[string]int64{}
	var allowed int64
	for _, e := range l.events {
		switch e.Kind {
		case budget.Reserved:
			if _, twice := reserved[e.OperationKey]; twice {
				t.Fatalf("operation %s reserved twice", e.OperationKey)
			}
			if e.Override == nil && e.SpentSeen+e.HeldSeen+e.Amount > e.Limit {
				t.Fatalf("operation %s reserved over the limit without an override: %+v", e.OperationKey, e)
			}
			reserved[e.OperationKey] = e.Amount
			allowed += e.Amount
		case budget.Settled:
			if _, twice := settled[e.OperationKey]; twice {
				t.Fatalf("operation %s settled twice", e.OperationKey)
			}
			settled[e.OperationKey] = e.Amount
		}
	}
	if allowed > limit {
		t.Fatalf("allowed %d over a limit of %d", allowed, limit)
	}
	return reserved, settled
}

// Reserves racing on one account through two and three gateways (each
// operation asked twice at once, on two gateways) never exceed the limit
// and never count a hold twice: with account leases (one gateway leads,
// the others forward) and without (every gateway races the others'
// compare-and-set appends). Both group decisions into commit groups. (A
// lease is asked for by a new command after a lost append, so a burst
// that was all queued before the first conflict may end without one; the
// leader is checked in TestBudgetHotLeaderKilled.)
func TestBudgetHotRacingGateways(t *testing.T) {
	for _, tc := range []struct {
		n      int
		noLead bool
	}{{2, false}, {3, false}, {2, true}, {3, true}} {
		t.Run(fmt.Sprintf("gateways=%d/noLead=%t", tc.n, tc.noLead), func(t *testing.T) {
			ctx := context.Background()
			n := tc.n
			g0 := startBudgetGateway(t, "", "gw-race-0", tc.noLead)
			gs := []*server.Gateway{g0}
			for i := 1; i < n; i++ {
				gs = append(gs, startBudgetGateway(t, g0.NatsURL, fmt.Sprintf("gw-race-%d", i), tc.noLead))
			}
			var cs []portcullisv1connect.BudgetServiceClient
			for _, g := range gs {
				cs = append(cs, budgetClient(g))
			}
			const limit, ops = 60_000, 300
			mustOK(t)(cs[0].SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "hot", Limit: limit, Currency: "USD"})))
			amounts := make([]int64, ops)
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcome := map[string]string{}
			for i := range ops {
				amounts[i] = int64(100 + rand.IntN(400))
				for j := range 2 { // the same operation on two gateways at once
					wg.Add(1)
					go func() {
						defer wg.Done()
						op := fmt.Sprintf("op-%d", i)
						res, err := reserveAgain(ctx, t, cs[(i+j)%n], reserve("hot", op, fmt.Sprintf("sha256:%d", i), amounts[i]))
						if err != nil {
							t.Error(err)
							return
						}
						allowed := res.Msg.GetDecision().GetAllowed()
						mu.Lock()
						defer mu.Unlock()
						got := fmt.Sprint(allowed)
						if prev, ok := outcome[op]; ok && prev != got {
							t.Errorf("%s: allowed=%s on one gateway, %s on another", op, prev, got)
						}
						outcome[op] = got
					}()
				}
			}
			wg.Wait()
			l := readBudgetLedger(t, budgetStream(t, g0))
			reserved, _ := checkBudgetLedger(t, l, limit)
			var allowed int64
			for op, ok := range outcome {
				if ok == "true" {
					if _, in := reserved[op]; !in {
						t.Fatalf("%s answered allowed but not reserved in the ledger", op)
					}
					allowed += reserved[op]
				}
			}
			if len(reserved) != len(outcome)-countFalse(outcome) {
				t.Fatalf("%d reserved in the ledger, %d answered allowed", len(reserved), len(outcome)-countFalse(outcome))
			}
			acc, err := cs[n-1].GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "hot"}))
			if err != nil {
				t.Fatal(err)
			}
			if acc.Msg.GetAccount().GetHeld() != allowed {
				t.Fatalf("held %d, allowed %d", acc.Msg.GetAccount().GetHeld(), allowed)
			}
			if l.groups == 0 {
				t.Fatalf("no commit group in %d decisions", len(l.events))
			}
			holder := budgetLeaseHolder(t, g0, "hot")
			if tc.noLead && holder != "" {
				t.Fatalf("lease holder %q without leading", holder)
			}
			if !tc.noLead {
				// A burst may end before anyone asks for the lease: more
				// bursts until a command was forwarded (bounded).
				for b := 0; b < 8 && leadCount(t, gs, keeper.ForwardAnswered) == 0; b++ {
					var bw sync.WaitGroup
					for i := range 64 {
						bw.Add(1)
						go func() {
							defer bw.Done()
							op := fmt.Sprintf("more-%d-%d", b, i)
							if _, err := reserveAgain(ctx, t, cs[i%n], reserve("hot", op, "sha256:"+op, 1)); err != nil {
								t.Error(err)
							}
						}()
					}
					bw.Wait()
				}
				holder = budgetLeaseHolder(t, g0, "hot")
			}
			checkLeadMetrics(t, gs, holder, tc.noLead)
		})
	}
}

// reserveAgain reserves as a client does: an unknown outcome (Unavailable:
// under the race detector on a busy machine a forward to the account's
// leader can outlast its wait) is retried with the same operation key,
// which the ledger decides once however often it is asked.
func reserveAgain(ctx context.Context, t *testing.T, c portcullisv1connect.BudgetServiceClient, req *connect.Request[pb.ReserveRequest]) (*connect.Response[pb.ReserveResponse], error) {
	for try := 1; ; try++ {
		res, err := c.Reserve(ctx, connect.NewRequest(req.Msg))
		if connect.CodeOf(err) != connect.CodeUnavailable || try == 5 {
			return res, err
		}
		t.Logf("%s: retried after %v", req.Msg.GetOperationKey(), err)
	}
}

// checkLeadMetrics checks what the gateways' /metrics say of leading
// the account: without leases no lead event at all; with a lease holder,
// the holder took the lease, and every forward another gateway had
// answered is one the holder served (nothing was lost in a healthy run).
func checkLeadMetrics(t *testing.T, gs []*server.Gateway, holder string, noLead bool) {
	t.Helper()
	const name = "portcullis_budget_lead_events_total"
	count := func(g *server.Gateway, event string) float64 {
		v, _ := sample(t, scrape(t, g), name, map[string]string{"event": event})
		return v
	}
	if !noLead && leadCount(t, gs, keeper.ForwardAnswered) == 0 {
		t.Fatalf("no command was forwarded to the account's leader")
	}
	var answered, served, unknown float64
	for _, g := range gs {
		if noLead {
			if _, ok := scrape(t, g)[name]; ok {
				t.Fatalf("gateway %s counts lead events without leading", g.ID)
			}
			continue
		}
		answered += count(g, string(keeper.ForwardAnswered))
		served += count(g, string(keeper.ForwardServed))
		unknown += count(g, string(keeper.ForwardUnknown))
		if g.ID == holder && count(g, string(keeper.LeaseTaken)) < 1 {
			t.Errorf("gateway %s holds the lease but counted no lease_taken", g.ID)
		}
	}
	if answered+unknown != served {
		t.Errorf("forwards: %v answered + %v unknown at the senders, %v served by leaders", answered, unknown, served)
	}
	t.Logf("lead metrics: %v forwards answered, %v served, %v unknown (holder %q)", answered, served, unknown, holder)
}

// leadCount is a lead event's count summed over the gateways.
func leadCount(t *testing.T, gs []*server.Gateway, e keeper.LeadEvent) float64 {
	t.Helper()
	var sum float64
	for _, g := range gs {
		v, _ := sample(t, scrape(t, g), "portcullis_budget_lead_events_total", map[string]string{"event": string(e)})
		sum += v
	}
	return sum
}

func countFalse(m map[string]string) int {
	n := 0
	for _, v := range m {
		if v == "false" {
			n++
		}
	}
	return n
}

// budgetLeaseHolder is the gateway the account's lease names ("" when none).
func budgetLeaseHolder(t testing.TB, g *server.Gateway, account string) string {
	t.Helper()
	js, err := jetstream.New(natsConnect(t, g, natsauth.Analyst))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), "PORTCULLIS_BUDGET_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), "pc.lease.budget."+account)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var l keeper.Lease
	if err := json.Unmarshal(m.Data, &l); err != nil {
		t.Fatal(err)
	}
	return l.Gateway
}

// The gateway leading a hot account is SIGKILLed while reserves and
// settlements stream through it and another gateway: the other takes
// over, and every operation ends reserved once and settled once — no
// decision lost (everything answered is in the ledger), none doubled
// (callers retry what died with the leader under the same key).
func TestBudgetHotLeaderKilled(t *testing.T) {
	ctx := context.Background()
	g0 := startGateway(t, "", nil) // holds the NATS server; takes no budget commands
	cfg := writeConfig(t)
	ids := []string{"gw-a", "gw-b"}
	addrs := map[string]string{}
	cmds := map[string]func() error{}
	for _, id := range ids {
		addr := freeAddr(t)
		p := serveProcess(t, t.TempDir(), addr, cfg, "--nats-url", g0.NatsURL, "--gateway-id", id)
		addrs[id] = addr
		cmds[id] = func() error { return p.Process.Signal(syscall.SIGKILL) }
	}
	client := func(id string) portcullisv1connect.BudgetServiceClient {
		return portcullisv1connect.NewBudgetServiceClient(http.DefaultClient, "http://"+addrs[id])
	}
	const limit = 1_000_000
	mustOK(t)(budgetClient(g0).SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "hot", Limit: limit, Currency: "USD"})))
	const workers, perWorker, killAfter = 16, 25, 120
	var done atomic.Int32
	var dead atomic.Bool
	var survivor string
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[string]bool{} // op → reserved (answered allowed)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				op := fmt.Sprintf("op-%d-%d", w, i)
				// try runs step on this worker's gateway, or on the survivor once the leader is dead.
				try := func(step func(c portcullisv1connect.BudgetServiceClient) error) {
					for {
						id := ids[w%2]
						if dead.Load() {
							id = survivor
						}
						err := step(client(id))
						if err == nil {
							return
						}
						if ctx.Err() != nil {
							t.Error(err)
							return
						}
						// the leader died under this call (or its gateway did): retry with the same key
					}
				}
				try(func(c portcullisv1connect.BudgetServiceClient) error {
					res, err := c.Reserve(ctx, reserve("hot", op, "sha256:"+op, 10))
					if err == nil {
						if !res.Msg.GetDecision().GetAllowed() {
							return fmt.Errorf("%s denied", op)
						}
						mu.Lock()
						answered[op] = true
						mu.Unlock()
					}
					return err
				})
				try(func(c portcullisv1connect.BudgetServiceClient) error {
					_, err := c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "hot", OperationKey: op, Amount: 10,
						Evidence: &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200}}))
					if err != nil && strings.Contains(err.Error(), budget.ErrAlreadyClosed.Error()) {
						return nil // an earlier try settled it before its answer was lost
					}
					return err
				})
				if done.Add(1) == killAfter {
					once.Do(func() { close(killed) })
				}
			}
		}()
	}
	<-killed
	// The two gateways' first appends raced; the account has a leader now.
	var leader string
	waitFor(t, "a gateway leads the account", func() bool { leader = budgetLeaseHolder(t, g0, "hot"); return leader != "" })
	survivor = ids[0]
	if leader == ids[0] {
		survivor = ids[1]
	}
	if err := cmds[leader](); err != nil {
		t.Fatal(err)
	}
	dead.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	l := readBudgetLedger(t, budgetStream(t, g0))
	reserved, settled := checkBudgetLedger(t, l, limit)
	for w := range workers {
		for i := range perWorker {
			op := fmt.Sprintf("op-%d-%d", w, i)
			if !answered[op] {
				t.Fatalf("%s never answered", op)
			}
			if reserved[op] != 10 || settled[op] != 10 {
				t.Fatalf("%s: reserved %d, settled %d in the ledger, want 10 and 10", op, reserved[op], settled[op])
			}
		}
	}
	acc, err := client(survivor).GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "hot"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := acc.Msg.GetAccount(); a.GetSpent() != workers*perWorker*10 || a.GetHeld() != 0 {
		t.Fatalf("spent %d held %d, want %d and 0", a.GetSpent(), a.GetHeld(), workers*perWorker*10)
	}
	// Once the dead leader's lease lapses, the survivor's next command takes it.
	n := 0
	waitFor(t, "the survivor leads", func() bool {
		n++
		op := fmt.Sprint("op-after-", n)
		if _, err := client(survivor).Reserve(ctx, reserve("hot", op, "sha256:after", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := client(survivor).Release(ctx, connect.NewRequest(&pb.ReleaseRequest{Account: "hot", OperationKey: op, Evidence: &pb.Evidence{TargetStatus: 404}})); err != nil {
			t.Fatal(err)
		}
		return budgetLeaseHolder(t, g0, "hot") == survivor
	})
}

// A late retry of an operation closed thousands of operations ago finds
// its outcome on the leading gateway and on the one that forwards, a
// second settlement moves nothing, and the leader keeps in memory only
// the open holds and the closed operations the views do not hold yet,
// not the account's history.
func TestBudgetHotLateRetryAfterHistory(t *testing.T) {
	ctx := context.Background()
	g1 := startGateway(t, "", nil)
	g2 := startGatewayID(t, g1.NatsURL, "gw-late")
	gs := []*server.Gateway{g1, g2}
	if _, err := g1.Keeper.SetLimit(ctx, budget.Limit{Account: "acme", Currency: "GBP", Limit: 1_000_000_000, Delegator: "cfo"}); err != nil {
		t.Fatal(err)
	}
	ev := budget.Evidence{ExecutionID: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200}
	const history, callers = 5000, 32
	var next atomic.Int32
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := gs[c%2].Keeper
			for i := int(next.Add(1)); i <= history; i = int(next.Add(1)) {
				op := fmt.Sprint("op-", i)
				if _, _, err := k.Reserve(ctx, "acme", budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:h", Amount: 10}); err != nil {
					t.Error(err)
					return
				}
				if _, err := k.Settle(ctx, "acme", op, 10, ev); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, g := range gs {
		for _, op := range []string{"op-1", "op-2", fmt.Sprint("op-", history/2)} {
			_, d, err := g.Keeper.Reserve(ctx, "acme", budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:h", Amount: 10})
			if err != nil {
				t.Fatalf("%s: late retry of %s: %v", g.ID, op, err)
			}
			if d.Outcome != budget.OutcomeSpent {
				t.Fatalf("%s: late retry of %s: %s, want %s", g.ID, op, d.Outcome, budget.OutcomeSpent)
			}
			if _, err := g.Keeper.Settle(ctx, "acme", op, 10, ev); !errors.Is(err, budget.ErrAlreadyClosed) {
				t.Fatalf("%s: second settlement of %s: %v, want ErrAlreadyClosed", g.ID, op, err)
			}
		}
	}
	for _, g := range gs { // both views hold everything
		if _, err := g.Keeper.Account(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
	}
	h, err := g1.Keeper.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if h.Account.Spent != history*10 || h.Account.Held != 0 {
		t.Fatalf("spent %d held %d, want %d and 0", h.Account.Spent, h.Account.Held, history*10)
	}
	// The views hold everything now; the leader's next decision drops what they hold from memory.
	if _, _, err := g1.Keeper.Reserve(ctx, "acme", budget.ReserveRequest{OperationKey: "op-last", RequestDigest: "sha256:h", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	leader := g1
	if budgetLeaseHolder(t, g1, "acme") == g2.ID {
		leader = g2
	}
	if holds, closed := leader.Keeper.InMemory("acme"); holds != 1 || closed > 0 {
		t.Fatalf("leader keeps %d holds and %d closed operations in memory after %d closed, want 1 and 0", holds, closed, history)
	}
}

// BenchmarkHotAccountLead: BenchmarkHotAccount's 1 000-closed cell with
// and without account leases on both gateways (without: in-memory state
// and commit groups, the gateways racing each other's appends).
func BenchmarkHotAccountLead(b *testing.B) {
	for _, noLead := range []bool{false, true} {
		b.Run(fmt.Sprintf("noLead=%t", noLead), func(b *testing.B) {
			g1 := startBudgetGateway(b, "", "gw-bench-1", noLead)
			g2 := startBudgetGateway(b, g1.NatsURL, "gw-bench-2", noLead)
			ks := []*keeper.Keeper{g1.Keeper, g2.Keeper}
			if _, err := ks[0].SetLimit(context.Background(), budget.Limit{Account: "hot", Currency: "GBP", Limit: 1 << 50, Delegator: "bench"}); err != nil {
				b.Fatal(err)
			}
			if err := parallelOps(64, 1000, func(c, i int) error { return reserveSettle(ks[c%2], "hot", fmt.Sprint("pre-", i)) }); err != nil {
				b.Fatal(err)
			}
			n := min(b.N, hotOps)
			lat := make([][]time.Duration, 64)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for c := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
						t0 := time.Now()
						if err := reserveSettle(ks[c%2], "hot", fmt.Sprint("op-", i)); err != nil {
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
		})
	}
}
