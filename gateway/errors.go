package gateway

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// connectError maps ledger errors to Connect codes. It is the only place
// that does.
func connectError(err error) error {
	var ite *ledger.IllegalTransitionError
	code := connect.CodeInternal
	switch {
	case errors.As(err, &ite):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, ledger.ErrInvalid), errors.Is(err, toolcall.ErrInvalid), errors.Is(err, budget.ErrBadAccount),
		errors.Is(err, budget.ErrMissingKey), errors.Is(err, budget.ErrInvalidAmount), errors.Is(err, budget.ErrOverflow),
		errors.Is(err, budget.ErrCurrency), errors.Is(err, budget.ErrInvalidRequest):
		code = connect.CodeInvalidArgument
	case errors.Is(err, budget.ErrUnknownAccount):
		code = connect.CodeNotFound
	case errors.Is(err, budget.ErrKeyReuse):
		code = connect.CodeAlreadyExists
	case errors.Is(err, budget.ErrNotHeld), errors.Is(err, budget.ErrAlreadyClosed), errors.Is(err, budget.ErrLimitNotValid),
		errors.Is(err, budget.ErrTooManyHolds):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, ledger.ErrNoContract), errors.Is(err, ledger.ErrBudgetDenied), errors.Is(err, ledger.ErrDeadlineAhead):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, ledger.ErrKeyReuse):
		code = connect.CodeAlreadyExists
	case errors.Is(err, ledger.ErrNotFound):
		code = connect.CodeNotFound
	case errors.Is(err, ledger.ErrContended), errors.Is(err, ledger.ErrConflict):
		code = connect.CodeAborted
	case errors.Is(err, ledger.ErrAppendUnknown):
		code = connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	}
	return connect.NewError(code, err)
}
