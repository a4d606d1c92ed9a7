package test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
	"google.golang.org/protobuf/proto"
)

// Each NATS role takes its replies under its own inbox prefix
// (_INBOX.<role>.) and may subscribe there only. Finance, holding its own
// nkey, tries to listen to every inbox, the gateway's and the analyst's:
// the server refuses each subscription and finance hears nothing, while a
// second gateway (joined over TCP) catches up the first one's executions
// and a gateway client's direct gets bring whole execution events; the
// finance and analyst reads (what `budget export` and `export` do) work.
func TestRoleInboxesArePrivate(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	g2 := startGateway(t, g.NatsURL, nil)

	r := &refusals{got: make(chan struct{}, 1)}
	auth, err := natsauth.ClientOption(g.CredsFile(natsauth.Finance))
	if err != nil {
		t.Fatal(err)
	}
	fin, err := nats.Connect(g.NatsURL, auth, natsauth.Inbox(natsauth.Finance), nats.ErrorHandler(r.handler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fin.Close)
	var heard atomic.Int64
	var first atomic.Value
	for _, subject := range []string{"_INBOX.>", natsauth.InboxPrefix(natsauth.Gateway) + ".>", natsauth.InboxPrefix(natsauth.Analyst) + ".>", "_INBOX.*.>", natsauth.BudgetAnswerPrefix + ">"} {
		if _, err := fin.Subscribe(subject, func(m *nats.Msg) {
			if heard.Add(1) == 1 {
				first.Store(m.Subject)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := fin.Flush(); err != nil {
			t.Fatal(err)
		}
		r.wait(t, fmt.Sprintf("Subscription to %q", subject))
	}

	// The gateways work: executions begun on both, each reads the
	// other's (catch-up reads through its inbox).
	var ids []string
	for i, gw := range []*server.Gateway{g, g2, g, g2} {
		a := args(t, map[string]any{"release_id": fmt.Sprintf("2026.07.%02d", i), "comment": "inbox"})
		res, err := client(gw).Begin(ctx, beginReq("deploy_release", a, "", fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("Begin on gateway %d: %v", i%2, err)
		}
		x := res.Msg.GetExecution()
		ids = append(ids, x.GetExecutionId())
		// The other gateway sees it (it reads the first one's event).
		other := []*server.Gateway{g2, g}[i%2]
		if _, err := client(other).MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: x.GetExecutionId()})); err != nil {
			t.Fatalf("MarkDispatched on the other gateway: %v", err)
		}
		// A gateway client's direct get brings the whole event.
		js, err := jetstream.New(natsConnect(t, g, natsauth.Gateway))
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, ledger.ExecutionsStream)
		if err != nil {
			t.Fatal(err)
		}
		if !s.CachedInfo().Config.AllowDirect {
			t.Fatal("the executions stream does not allow direct gets")
		}
		m, err := s.GetLastMsgForSubject(ctx, ledger.ExecutionSubject(x.GetIntentToken(), x.GetExecutionId()))
		if err != nil {
			t.Fatalf("gateway direct get: %v", err)
		}
		var ev pb.Event
		if err := proto.Unmarshal(m.Data, &ev); err != nil || ev.GetExecutionChanged().GetExecution().GetExecutionId() != x.GetExecutionId() {
			t.Fatalf("direct get brought %v (%v), want the execution's event", ev.GetType(), err)
		}
	}

	// Finance reads its stream; the analyst reads the ledger.
	if err := server.ReadBudget(ctx, server.Options{NatsURL: g.NatsURL, NatsCreds: g.CredsFile(natsauth.Finance)}, func(uint64, *pb.BudgetDecision) error {
		return nil
	}); err != nil {
		t.Fatalf("finance reads the budget stream: %v", err)
	}
	var records int
	if err := server.ReadLedger(ctx, server.Options{NatsURL: g.NatsURL, NatsCreds: g.CredsFile(natsauth.Analyst)}, func(audit.LedgerTrust) error { return nil }, func(audit.Record, time.Time) error {
		records++
		return nil
	}); err != nil || records < 2*len(ids) {
		t.Fatalf("analyst reads the ledger: %d records, %v", records, err)
	}

	time.Sleep(500 * time.Millisecond) // the gateways' periodic reads go on meanwhile
	if n := heard.Load(); n != 0 {
		t.Fatalf("finance heard %d replies meant for others (first on %v)", n, first.Load())
	}
}

// The gateway user has no allow_responses: with it, a gateway client could
// send itself a message on pcrpc.budget.* whose reply subject is a
// JetStream API request and then "answer" it, deleting a stream only the
// admin may delete. Answers to forwarded budget commands have their own
// subjects (natsauth.BudgetAnswerPrefix).
func TestGatewayCannotAnswerIntoTheJetStreamAPI(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	r := &refusals{got: make(chan struct{}, 1)}
	auth, err := natsauth.ClientOption(g.CredsFile(natsauth.Gateway))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(g.NatsURL, auth, natsauth.Inbox(natsauth.Gateway), nats.ErrorHandler(r.handler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(natsauth.BudgetRPCPrefix + "gw-evil")
	if err != nil {
		t.Fatal(err)
	}
	target := "$JS.API.STREAM.DELETE." + keeper.Stream
	if err := nc.PublishRequest(natsauth.BudgetRPCPrefix+"gw-evil", target, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Reply != target {
		t.Fatalf("reply %q", m.Reply)
	}
	if err := m.Respond(nil); err != nil {
		t.Fatal(err)
	}
	r.wait(t, target)
	js, err := jetstream.New(natsConnect(t, g, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, keeper.Stream); err != nil {
		t.Fatalf("the budget stream after a gateway answered into STREAM.DELETE: %v", err)
	}
}
