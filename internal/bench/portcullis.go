package main

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/types/known/structpb"
)

// opFunc is one operation of a workload.
type opFunc func(ctx context.Context, caller, i int) error

// A workload sets up a fresh gateway for one cell and returns its
// operation and the cleanup.
type workload func(ctx context.Context, callers int) (opFunc, func(), error)

func connectAction(i int, run string) (*pb.Action, error) {
	a, err := structpb.NewStruct(map[string]any{"amount": 1000 + i, "currency": "GBP", "customer": "cus_4711", "description": "order " + strconv.Itoa(i)})
	if err != nil {
		return nil, err
	}
	return &pb.Action{
		Actor: "agent-7", Tool: "create_payment", Channel: "http", Target: "payments.example.com/v1/charges",
		Method: "POST", IntentScope: run, Arguments: a,
	}, nil
}

func wantDecision(got, want pb.Decision) error {
	if got != want {
		return fmt.Errorf("decision %v, want %v", got, want)
	}
	return nil
}

// beginNewShards: every call a new intent, in-process, on a ledger of
// shards execution shards.
func beginNewShards(shards int) workload {
	return func(ctx context.Context, _ int) (opFunc, func(), error) {
		g, err := startGWShards(ctx, ledgerConfig, nil, "", shards)
		if err != nil {
			return nil, nil, err
		}
		return beginOp(g, false, "run:"+nuid.Next(), eachNew, pb.Decision_DECISION_NEW), g.close, nil
	}
}

// eachNew keys every call to an intent of its own.
func eachNew(_, i int) int { return i }

// beginNew: every call a new intent.
func beginNew(viaConnect bool) workload {
	return func(ctx context.Context, _ int) (opFunc, func(), error) {
		g, err := startGW(ctx, ledgerConfig, nil, "")
		if err != nil {
			return nil, nil, err
		}
		return beginOp(g, viaConnect, "run:"+nuid.Next(), eachNew, pb.Decision_DECISION_NEW), g.close, nil
	}
}

// beginOp is one Begin of intent key(caller, i) of run, in-process or over
// Connect, that must end in want.
func beginOp(g *gw, viaConnect bool, run string, key func(c, i int) int, want pb.Decision) opFunc {
	if !viaConnect {
		return func(ctx context.Context, c, i int) error {
			res, err := g.Ledger.Begin(ctx, ledger.BeginInput{Action: benchAction(key(c, i), run)})
			if err != nil {
				return err
			}
			return wantDecision(res.Decision, want)
		}
	}
	cl := portcullisv1connect.NewExecutionServiceClient(httpClient(), "http://"+g.Addr)
	return func(ctx context.Context, c, i int) error {
		a, err := connectAction(key(c, i), run)
		if err != nil {
			return err
		}
		res, err := cl.Begin(ctx, connect.NewRequest(&pb.BeginRequest{Action: a, Correlation: &pb.Correlation{JsonrpcId: strconv.Itoa(i), SessionId: "sess-1"}}))
		if err != nil {
			return err
		}
		return wantDecision(res.Msg.Decision, want)
	}
}

// attachIntents is how many known intents the attach workload retries.
const attachIntents = 1024

// beginAttach: retries of known intents, each caller cycling through its own.
func beginAttach(viaConnect bool) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		g, err := startGW(ctx, ledgerConfig, nil, "")
		if err != nil {
			return nil, nil, err
		}
		run := "run:" + nuid.Next()
		if err := parallel(ctx, 64, attachIntents, func(ctx context.Context, i int) error {
			_, err := g.Ledger.Begin(ctx, ledger.BeginInput{Action: benchAction(i, run)})
			return err
		}); err != nil {
			g.close()
			return nil, nil, err
		}
		per := max(1, attachIntents/callers)
		key := func(c, i int) int { return (c*per + i%per) % attachIntents }
		return beginOp(g, viaConnect, run, key, pb.Decision_DECISION_ATTACHED), g.close, nil
	}
}

// reserveAccounts is how many accounts the caller-matrix Reserve workload
// spreads over (so no account's history grows much during a cell).
const reserveAccounts = 1000

// reserveSpread: one operation = reserve + settle on one of 1 000 accounts.
func reserveSpread(viaConnect bool) workload {
	return func(ctx context.Context, _ int) (opFunc, func(), error) {
		g, err := startGW(ctx, ledgerConfig, nil, "")
		if err != nil {
			return nil, nil, err
		}
		if err := parallel(ctx, 64, reserveAccounts, func(ctx context.Context, a int) error {
			_, err := g.Keeper.SetLimit(ctx, budget.Limit{Account: fmt.Sprintf("acct-%d", a), Currency: "GBP", Limit: 1 << 50, Delegator: "bench"})
			return err
		}); err != nil {
			g.close()
			return nil, nil, err
		}
		pfx := nuid.Next()
		if !viaConnect {
			return keeperOp([]*gw{g}, reserveAccounts, pfx), g.close, nil
		}
		c := portcullisv1connect.NewBudgetServiceClient(httpClient(), "http://"+g.Addr)
		return func(ctx context.Context, _, i int) error {
			acct, op := fmt.Sprintf("acct-%d", i%reserveAccounts), pfx+"-"+strconv.Itoa(i)
			r, err := c.Reserve(ctx, connect.NewRequest(&pb.ReserveRequest{Account: acct, OperationKey: op, RequestDigest: "sha256:x", Amount: 100}))
			if err != nil {
				return err
			}
			if r.Msg.Decision.GetOutcome() != string(budget.Reserved) {
				return fmt.Errorf("outcome %s", r.Msg.Decision.GetOutcome())
			}
			_, err = c.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: acct, OperationKey: op, Amount: 100, Evidence: &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200}}))
			return err
		}, g.close, nil
	}
}

// keeperOp: reserve + settle in-process, caller c on gateway c%len(gs),
// operation i on account "acct-<i mod accounts>".
func keeperOp(gs []*gw, accounts int, pfx string) opFunc {
	return accountOp(gs, func(i int) string { return fmt.Sprintf("acct-%d", i%accounts) }, pfx)
}

// accountOp: reserve + settle in-process, caller c on gateway c%len(gs),
// operation i on account acct(i).
func accountOp(gs []*gw, acctOf func(i int) string, pfx string) opFunc {
	return func(ctx context.Context, c, i int) error {
		k, acct, op := gs[c%len(gs)].Keeper, acctOf(i), pfx+"-"+strconv.Itoa(i)
		_, d, err := k.Reserve(ctx, acct, budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:x", Amount: 100})
		if err != nil {
			return err
		}
		if d.Outcome != budget.OutcomeHeld {
			return fmt.Errorf("outcome %s", d.Outcome)
		}
		_, err = k.Settle(ctx, acct, op, 100, budget.Evidence{ExecutionID: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 200})
		return err
	}
}
