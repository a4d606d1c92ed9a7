package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// BudgetRow is one budget event folded, for the account's decision list:
// where the stream stores it and its hash (the list reads the event back
// from the stream and checks it is the one folded).
type BudgetRow struct {
	Seq     uint64
	Account string
	Hash    []byte
}

// BudgetStore is the budget views' write side.
type BudgetStore interface {
	Checkpoint(stream string) (uint64, error)
	Mark(stream string) (Mark, error)
	// Account is the account as folded so far (ledger.ErrNotFound: none);
	// its Closed map may hold only some closed operations, ClosedOp the rest.
	Account(ctx context.Context, name string) (keeper.Head, error)
	// ClosedOp is one closed operation of an account as folded so far.
	ClosedOp(ctx context.Context, account, opKey string) (budget.Closed, bool, error)
	// WriteBudget stores the accounts, the decision rows and the checkpoint
	// in one atomic batch, with the messages it quarantined. Each account's
	// closed operations are stored as rows of their own (those it holds are
	// the ones loaded or closed in this batch).
	WriteBudget(accounts map[string]keeper.Head, rows []BudgetRow, quarantined []*pb.Quarantined, mark Mark) error
}

// NewBudget returns a Projector of the budget stream.
func NewBudget(src Source, store BudgetStore, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{now: time.Now}
	b := &budgets{store: store, guard: g, log: log}
	return &Projector{stream: keeper.Stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: b.apply, log: log, guard: g}
}

// errViewRead: the views could not be read now; the batch is retried,
// never quarantined.
var errViewRead = errors.New("budget views unreadable")

type budgets struct {
	store BudgetStore
	guard *guard
	log   *slog.Logger
}

// apply folds budget events through the domain's Apply, which refuses an
// event that does not follow the account (a stale decision appended without
// its condition, a broken chain). Such an event, and one that is
// undecodable or not signed by an enrolled gateway, is quarantined and the
// fold goes on: the views never hold a state the record does not prove.
func (b *budgets) apply(ctx context.Context, entries []Entry, mark Mark) error {
	accounts := map[string]keeper.Head{}
	rows := make([]BudgetRow, 0, len(entries))
	var quarantined []*pb.Quarantined
	for _, e := range entries {
		name, nameOK := keeper.AccountFromSubject(e.Subject)
		var h keeper.Head
		found := false
		if nameOK {
			var ok bool
			if h, ok = accounts[name]; ok && h.Account != nil {
				found = true
			} else if ok {
				h = keeper.Head{Seq: h.Seq, Account: &budget.Account{}} // only quarantined so far
			} else {
				var err error
				h, err = b.store.Account(ctx, name) // a fresh copy, folded in place below
				switch {
				case err == nil:
					found = true
				case errors.Is(err, ledger.ErrNotFound):
					h = keeper.Head{Account: &budget.Account{}}
				default:
					return err
				}
			}
		}
		load := func(a *budget.Account, opKey string) error { return b.loadClosed(ctx, name, a, opKey) }
		ev, folded, fault := checkBudgetEntry(e, nameOK, h, b.guard.keys, load)
		if errors.Is(fault, ledger.ErrKeysUnavailable) || errors.Is(fault, errViewRead) {
			return fmt.Errorf("projector %s seq %d: %w", keeper.Stream, e.Seq, fault) // retried, never quarantined
		}
		if fault != nil {
			quarantined = append(quarantined, b.guard.quarantine(keeper.Stream, e, ev, fault))
			b.log.Warn("event quarantined", "stream", keeper.Stream, "seq", e.Seq, "subject", e.Subject, "reason", fault)
			switch {
			case found:
				h.Seq = e.Seq // the account's real last sequence; its state stays
				accounts[name] = h
			case nameOK:
				accounts[name] = keeper.Head{Seq: e.Seq} // no account yet: only the sequence
			}
			continue
		}
		accounts[name] = keeper.Head{Seq: e.Seq, Hash: ev.GetHash(), Account: folded}
		rows = append(rows, BudgetRow{Seq: e.Seq, Account: name, Hash: ev.GetHash()})
	}
	return b.store.WriteBudget(accounts, rows, quarantined, mark)
}

// loadClosed adds an account's closed operation opKey from the store to a,
// unless a holds it open or closed already.
func (b *budgets) loadClosed(ctx context.Context, name string, a *budget.Account, opKey string) error {
	if opKey == "" {
		return nil
	}
	if _, held := a.Holds[opKey]; held {
		return nil
	}
	if _, closed := a.Closed[opKey]; closed {
		return nil
	}
	c, ok, err := b.store.ClosedOp(ctx, name, opKey)
	if err != nil || !ok {
		return err
	}
	if a.Closed == nil {
		a.Closed = map[string]budget.Closed{}
	}
	a.Closed[opKey] = c
	return nil
}

// checkBudgetEntry checks one stored budget event against its account and
// returns the account after it when it is valid: a single decision is
// applied to h.Account (a fresh copy) in place, a commit group's members
// in order to a copy, so that a group is folded whole or not at all. load
// first brings the closed operation a decision names into the account.
// Apply changes an account only when it accepts the event.
func checkBudgetEntry(e Entry, nameOK bool, h keeper.Head, keys ledger.Keys, load func(a *budget.Account, opKey string) error) (*pb.Event, *budget.Account, error) {
	if !nameOK {
		return nil, nil, fmt.Errorf("%w: %s is not an account subject", ledger.ErrCorrupt, e.Subject)
	}
	ev := new(pb.Event)
	if err := proto.Unmarshal(e.Data, ev); err != nil {
		return nil, nil, fmt.Errorf("%w: %w: %v", ledger.ErrCorrupt, ledger.ErrUndecodable, err)
	}
	if err := ledger.CheckSigned(ev, keys); err != nil {
		return ev, nil, err
	}
	if string(ev.GetPrevHash()) != string(h.Hash) || ev.GetSubject() != e.Subject {
		return ev, nil, fmt.Errorf("%w: chain broken on %s", ledger.ErrCorrupt, e.Subject)
	}
	ds, err := keeper.Decisions(ev)
	if err != nil {
		return ev, nil, err
	}
	a := h.Account
	if len(ds) > 1 {
		a = a.Clone()
	}
	for _, d := range ds {
		be := keeper.FromProto(d)
		if err := load(a, be.OperationKey); err != nil {
			return ev, nil, fmt.Errorf("%w: %w", errViewRead, err)
		}
		if err := a.Apply(be); err != nil {
			return ev, nil, fmt.Errorf("%w: %v", ledger.ErrCorrupt, err)
		}
	}
	return ev, a, nil
}
