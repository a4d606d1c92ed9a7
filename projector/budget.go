package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// BudgetRow is one budget event folded: the account after it, and the
// stored event for the account's decision list.
type BudgetRow struct {
	Seq     uint64
	Account string
	Data    []byte
}

// BudgetStore is the budget views' write side.
type BudgetStore interface {
	Checkpoint(stream string) (uint64, error)
	Mark(stream string) (Mark, error)
	// Account is the account as folded so far (ledger.ErrNotFound: none).
	Account(ctx context.Context, name string) (keeper.Head, error)
	// WriteBudget stores the accounts, the decision rows and the checkpoint
	// in one atomic batch.
	WriteBudget(accounts map[string]keeper.Head, rows []BudgetRow, mark Mark) error
}

// NewBudget returns a Projector of the budget stream.
func NewBudget(src Source, store BudgetStore, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &budgets{store: store}
	return &Projector{stream: keeper.Stream, src: src, checkpoint: store.Checkpoint, mark: store.Mark, apply: b.apply, log: log}
}

type budgets struct{ store BudgetStore }

// apply folds budget events through the domain's Apply, which refuses an
// event that does not follow the account (a stale decision appended without
// its condition, a broken chain): the views never hold a state the
// record does not prove.
func (b *budgets) apply(ctx context.Context, entries []Entry, mark Mark) error {
	accounts := map[string]keeper.Head{}
	rows := make([]BudgetRow, 0, len(entries))
	for _, e := range entries {
		name, ok := keeper.AccountFromSubject(e.Subject)
		if !ok {
			return fmt.Errorf("projector %s seq %d: %w: %s is not an account subject", keeper.Stream, e.Seq, ledger.ErrCorrupt, e.Subject)
		}
		ev := new(pb.Event)
		if err := proto.Unmarshal(e.Data, ev); err != nil {
			return fmt.Errorf("projector %s seq %d: %w: %v", keeper.Stream, e.Seq, ledger.ErrCorrupt, err)
		}
		if err := ledger.CheckHash(ev); err != nil {
			return fmt.Errorf("projector %s seq %d: %w", keeper.Stream, e.Seq, err)
		}
		h, ok := accounts[name]
		if !ok {
			var err error
			h, err = b.store.Account(ctx, name) // a fresh copy, folded in place below
			if errors.Is(err, ledger.ErrNotFound) {
				h, err = keeper.Head{Account: &budget.Account{}}, nil
			}
			if err != nil {
				return err
			}
		}
		if string(ev.GetPrevHash()) != string(h.Hash) || ev.GetSubject() != e.Subject {
			return fmt.Errorf("projector %s seq %d: %w: chain broken on %s", keeper.Stream, e.Seq, ledger.ErrCorrupt, e.Subject)
		}
		d := ev.GetBudgetChanged()
		if d == nil {
			return fmt.Errorf("projector %s seq %d: %w: not a budget event", keeper.Stream, e.Seq, ledger.ErrCorrupt)
		}
		if err := h.Account.Apply(keeper.FromProto(d)); err != nil {
			// Nothing of this batch is written: the views stay at the checkpoint.
			return fmt.Errorf("projector %s seq %d: %w: %v", keeper.Stream, e.Seq, ledger.ErrCorrupt, err)
		}
		accounts[name] = keeper.Head{Seq: e.Seq, Hash: ev.GetHash(), Account: h.Account}
		rows = append(rows, BudgetRow{Seq: e.Seq, Account: name, Data: e.Data})
	}
	return b.store.WriteBudget(accounts, rows, mark)
}
