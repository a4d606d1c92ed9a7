package keeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Binding lets the execution ledger hold, settle and release the holds of
// budget-bound executions through a Keeper.
type Binding struct{ Keeper *Keeper }

var _ ledger.Budget = Binding{}

// Hold reserves the hold (a retry finds the existing one).
func (b Binding) Hold(ctx context.Context, h ledger.BudgetHold) (bool, string, error) {
	_, d, err := b.Keeper.Reserve(ctx, h.Account, budget.ReserveRequest{
		OperationKey: h.OperationKey, RequestDigest: h.RequestDigest, Amount: h.Amount, Currency: h.Currency,
	})
	if err != nil {
		return false, "", err // the ledger names the budget and account
	}
	switch d.Outcome {
	case budget.OutcomeHeld, budget.OutcomeAlreadyHeld:
		return true, "", nil
	case budget.OutcomeDenied:
		return false, fmt.Sprintf("spent + held + %d = %d is over the limit of %d", h.Amount, d.Total, d.Limit), nil
	default:
		return false, fmt.Sprintf("the hold of operation %s was already %s", h.OperationKey, d.Outcome), nil
	}
}

// Settle spends the whole hold; a hold already closed is left as it is.
func (b Binding) Settle(ctx context.Context, h ledger.BudgetHold, ev ledger.BudgetEvidence) error {
	_, err := b.Keeper.Settle(ctx, h.Account, h.OperationKey, h.Amount, evidence(ev))
	if errors.Is(err, budget.ErrAlreadyClosed) {
		return nil
	}
	return err
}

// Release ends the hold; a hold never taken or already closed is left as it is.
func (b Binding) Release(ctx context.Context, h ledger.BudgetHold, ev ledger.BudgetEvidence) error {
	_, err := b.Keeper.Release(ctx, h.Account, h.OperationKey, evidence(ev))
	if errors.Is(err, budget.ErrAlreadyClosed) || errors.Is(err, budget.ErrNotHeld) {
		return nil
	}
	return err
}

func evidence(ev ledger.BudgetEvidence) budget.Evidence {
	return budget.Evidence{ExecutionID: ev.ExecutionID, TargetStatus: ev.TargetStatus, Note: ev.Note}
}
