package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
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
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLast {
		return 0, fmt.Errorf("budget lease %s: %w", account, ledger.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("budget lease %s: %w", account, err)
	}
	return ack.Sequence, nil
}

// budgetForwarder forwards commands over NATS request/reply.
type budgetForwarder struct{ nc *nats.Conn }

func (f budgetForwarder) Forward(ctx context.Context, gateway string, req []byte) ([]byte, error) {
	m, err := f.nc.RequestWithContext(ctx, natsauth.BudgetRPCPrefix+gateway, req)
	if errors.Is(err, nats.ErrNoResponders) {
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
	names := make([]string, len(keeper.LeadEvents))
	for i, e := range keeper.LeadEvents {
		names[i] = string(e)
	}
	count := g.Metrics.BudgetLead(names)
	g.Keeper.OnLead(func(e keeper.LeadEvent) { count(string(e)) })
	g.Keeper.Lead(budgetLeases{js: g.nats.js, stream: st}, budgetForwarder{nc: g.nats.conn}, g.Keyring, keeper.ForwardKey(g.Key))
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
