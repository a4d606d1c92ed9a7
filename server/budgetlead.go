package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
)

// Budget account leases and forwarding (docs/performance.md, "Hot budget
// accounts"): the lease of account A is the one record on
// pc.lease.budget.A in the lease stream, written by compare-and-set on the
// subject's last sequence; a gateway serves the commands forwarded to it
// on NATS request/reply (natsauth.BudgetRPCPrefix + its gateway id).
const (
	budgetLeaseStream = "PORTCULLIS_BUDGET_LEASES"
	budgetLeasePfx    = "pc.lease.budget."
	errCodeWrongLast  = 10071 // JetStream: wrong last sequence per subject
)

// budgetLeaseConfig is the lease stream: the latest lease per account.
func budgetLeaseConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: budgetLeaseStream, Subjects: []string{budgetLeasePfx + "*"}, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		Description: "Portcullis: which gateway leads each budget account's decisions, and until when (JSON, the latest per account)",
		DenyDelete:  true, DenyPurge: true, AllowDirect: true, MaxMsgsPerSubject: 1,
		ConsumerLimits: ljs.ConsumerLimits(),
	}
}

// budgetLeases keeps account leases in the lease stream.
type budgetLeases struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

func (l budgetLeases) Lease(ctx context.Context, account string) (keeper.Lease, uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, budgetLeasePfx+account)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return keeper.Lease{}, 0, nil
	}
	if err != nil {
		return keeper.Lease{}, 0, fmt.Errorf("budget lease %s: %w", account, err)
	}
	var out keeper.Lease
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return keeper.Lease{}, m.Sequence, nil // unreadable: lapsed, taken over at its revision
	}
	return out, m.Sequence, nil
}

func (l budgetLeases) PutLease(ctx context.Context, account string, lease keeper.Lease, rev uint64) (uint64, error) {
	data, err := json.Marshal(lease)
	if err != nil {
		return 0, err
	}
	ack, err := l.js.Publish(ctx, budgetLeasePfx+account, data, jetstream.WithExpectLastSequencePerSubject(rev))
	if apiErrorCode(err) == errCodeWrongLast {
		return 0, fmt.Errorf("budget lease %s: %w", account, ledger.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("budget lease %s: %w", account, err)
	}
	return ack.Sequence, nil
}

// budgetForwarder forwards commands to the gateway leading an account: a
// request on natsauth.BudgetRPCPrefix + its id, whose reply subject is one
// of this forwarder's answer subjects (natsauth.BudgetAnswerPrefix + a
// random name + "." + a counter), where the leader publishes its answer
// under an explicit permission of the gateway user. Answers never go to
// the connection's inbox, where only the server publishes: the gateway
// user has no allow_responses (see natsauth.Permissions).
type budgetForwarder struct {
	nc *nats.Conn
	// prefix is "" on a NATS whose gateway user may not subscribe to
	// answers (an outside cluster's permissions from before answers had
	// their own subjects): then plain request/reply, answered into the
	// inbox through the old allow_responses.
	prefix  string
	mu      sync.Mutex
	next    uint64
	waiting map[string]chan *nats.Msg
}

// newBudgetForwarder subscribes to the forwarder's answer subjects (until
// the connection closes: forwards may still be sent while a gateway stops).
func newBudgetForwarder(nc *nats.Conn, lg *slog.Logger) (*budgetForwarder, error) {
	f := &budgetForwarder{nc: nc, prefix: natsauth.BudgetAnswerPrefix + nuid.Next() + ".", waiting: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(f.prefix+"*", f.answer)
	if err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil { // the server refuses a subscription before its PONG
		return nil, err
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), f.prefix) {
		_ = sub.Unsubscribe()
		lg.Warn("the NATS gateway user may not subscribe to "+natsauth.BudgetAnswerPrefix+"> (permissions of an older version): forwarded budget commands are answered through allow_responses, which lets the gateway user send any JetStream API request (delete a stream); give it the permissions of examples/nats-server.conf (docs/nats.md)", "err", err)
		return &budgetForwarder{nc: nc}, nil
	}
	return f, nil
}

// answer hands an answer to the forward waiting for it (none: it gave up).
func (f *budgetForwarder) answer(m *nats.Msg) {
	f.mu.Lock()
	ch := f.waiting[m.Subject]
	delete(f.waiting, m.Subject)
	f.mu.Unlock()
	if ch != nil {
		ch <- m // buffered: one answer per subject
	}
}

func (f *budgetForwarder) Forward(ctx context.Context, gateway string, req []byte) ([]byte, error) {
	if f.prefix == "" {
		return answerData(f.nc.RequestWithContext(ctx, natsauth.BudgetRPCPrefix+gateway, req))
	}
	ch := make(chan *nats.Msg, 1)
	f.mu.Lock()
	f.next++
	reply := f.prefix + strconv.FormatUint(f.next, 36)
	f.waiting[reply] = ch
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.waiting, reply)
		f.mu.Unlock()
	}()
	if err := f.nc.PublishRequest(natsauth.BudgetRPCPrefix+gateway, reply, req); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return answerData(m, nil)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answerData is an answer's body; NATS's "no responders" (status 503, no
// body, sent at once when nobody serves the leader's subject) is
// keeper.ErrNoLeader.
func answerData(m *nats.Msg, err error) ([]byte, error) {
	if errors.Is(err, nats.ErrNoResponders) || err == nil && len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return nil, keeper.ErrNoLeader
	}
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// leadBudget lets the keeper lead hot accounts: it serves the commands
// other gateways forward to this one until ctx ends. Without the lease
// stream (a ledger whose streams an admin has not updated yet) every
// command is decided where it arrives, as before (also with off).
func (g *Gateway) leadBudget(ctx context.Context, id string, off bool) error {
	if off {
		return nil
	}
	if len(g.Key) == 0 {
		return errors.New("budget forwarding: no fingerprint key to derive the forward key from")
	}
	st, err := g.nats.js.Stream(ctx, budgetLeaseStream)
	if err != nil {
		g.log.Warn("no budget lease stream; every gateway decides its own budget commands (run `portcullis streams` as admin)", "err", err)
		return nil
	}
	var (
		serving sync.WaitGroup // forwarded commands being decided
		mu      sync.Mutex
		stopped bool
	)
	// A queue group: one answer, also when two gateways share an id.
	sub, err := g.nats.conn.QueueSubscribe(natsauth.BudgetRPCPrefix+id, "budget", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return // never answered: the sender's request times out as unknown
		}
		serving.Add(1)
		go func() {
			defer serving.Done()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := m.Respond(g.Keeper.ServeForward(dctx, m.Data)); err != nil {
				g.log.Warn("budget forward: reply", "err", err)
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("budget forwarding: %w", err)
	}
	if err := g.nats.conn.Flush(); err != nil { // the subscription is in place before the first lease
		return fmt.Errorf("budget forwarding: %w", err)
	}
	fwd, err := newBudgetForwarder(g.nats.conn, g.log)
	if err != nil {
		return fmt.Errorf("budget forwarding: %w", err)
	}
	names := make([]string, len(keeper.LeadEvents))
	for i, e := range keeper.LeadEvents {
		names[i] = string(e)
	}
	count := g.Metrics.BudgetLead(names)
	g.Keeper.OnLead(func(e keeper.LeadEvent) { count(string(e)) })
	g.Keeper.Lead(budgetLeases{js: g.nats.js, stream: st}, fwd, g.Keyring, keeper.ForwardKey(g.Key))
	g.wg.Add(1) // Close waits for this before it closes the budget log
	go func() {
		defer g.wg.Done()
		<-ctx.Done()
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			g.log.Debug("budget forwarding: unsubscribe", slog.Any("err", err))
		}
		mu.Lock()
		stopped = true
		mu.Unlock()
		serving.Wait() // their answers go out (ctx ended: unknown outcome) before the log closes
	}()
	return nil
}
