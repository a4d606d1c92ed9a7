package test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/server"
)

// A gateway that writes alone folds its own events from its committers
// (ljs.Feed): after a tools/call through a journaled session and a budget
// reserve and settle, its views hold all of it and none of the streams it
// wrote (executions, budget, sessions) has a consumer, and the metrics
// count every event as fed. A projector that read its stream back would
// keep an ordered consumer open on it. A forged message is still read.
func TestOwnWritesNeedNoConsumer(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")

	s, err := mcpLegacySession(g, agentToken) // journaled in the sessions stream
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "create_payment", Arguments: map[string]any{"release_id": "r-feed", "n": 1}})
	if err != nil || r.IsError {
		t.Fatalf("tools/call: %v %v", r, err)
	}
	b := budgetClient(g)
	if _, err := b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "fed", Limit: 1000, Currency: "GBP"})); err != nil {
		t.Fatal(err)
	}
	mustOK(t)(b.Reserve(ctx, reserve("fed", "op-1", "sha256:x", 100)))
	mustOK(t)(b.Reserve(ctx, reserve("fed", "op-2", "sha256:y", 200)))
	mustOK(t)(b.Settle(ctx, connect.NewRequest(&pb.SettleRequest{Account: "fed", OperationKey: "op-1", Amount: 100,
		Evidence: &pb.Evidence{ExecutionId: "act_01J4K8J7DX7V0000000000000Z", TargetStatus: 201}})))
	acc, err := b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "fed"}))
	if err != nil || acc.Msg.GetAccount().GetSpent() != 100 || acc.Msg.GetAccount().GetHeld() != 200 {
		t.Fatalf("account: %v %v", acc, err)
	}
	if err := g.Views.BudgetWaitFor(ctx, streamLast(t, g, keeper.Stream)); err != nil {
		t.Fatal(err)
	}
	if err := g.Views.StreamWaitFor(ctx, mcp.SessionsStream, streamLast(t, g, mcp.SessionsStream)); err != nil {
		t.Fatal(err)
	}
	if err := g.Views.StreamWaitFor(ctx, ledger.ExecutionsStream, streamLast(t, g, ledger.ExecutionsStream)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ledger.ExecutionsStream, keeper.Stream, mcp.SessionsStream} {
		info := streamInfo(t, g, name)
		if info.State.Msgs == 0 {
			t.Fatalf("%s: nothing written", name)
		}
		if info.State.Consumers != 0 {
			t.Errorf("%s: %d consumers after this gateway's own writes, want none (its projector reads the stream back)", name, info.State.Consumers)
		}
	}
	// The metrics say the same: every event came from the feed.
	fams := scrape(t, g)
	for _, name := range []string{ledger.ExecutionsStream, keeper.Stream, mcp.SessionsStream} {
		wantSample(t, fams, "portcullis_projector_events_total", map[string]string{"stream": name, "source": "feed"}, float64(streamLast(t, g, name)))
		wantSample(t, fams, "portcullis_projector_events_total", map[string]string{"stream": name, "source": "stream"}, 0)
		wantSample(t, fams, "portcullis_projector_stream_reads_total", map[string]string{"stream": name}, 0)
	}
	// A message no gateway wrote is read from the stream, set aside, and counted.
	js := attacker(t, g)
	if _, err := js.Publish(ctx, "pc.budget.fed", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, g, 1)
	fams = scrape(t, g)
	wantAtLeast(t, fams, "portcullis_projector_events_total", map[string]string{"stream": keeper.Stream, "source": "stream"}, 1)
	wantAtLeast(t, fams, "portcullis_projector_stream_reads_total", map[string]string{"stream": keeper.Stream}, 1)
}

func streamInfo(t *testing.T, g *server.Gateway, name string) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(natsConnect(t, g, natsauth.Analyst))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func streamLast(t *testing.T, g *server.Gateway, name string) uint64 {
	t.Helper()
	return streamInfo(t, g, name).State.LastSeq
}
