package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// Every error the ledger, the budget and the tool binding return maps to
// the Connect code the API documents, also when wrapped with context; an
// error nobody classified is internal.
func TestConnectErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{&ledger.IllegalTransitionError{}, connect.CodeFailedPrecondition},
		{ledger.ErrInvalid, connect.CodeInvalidArgument},
		{toolcall.ErrInvalid, connect.CodeInvalidArgument},
		{budget.ErrBadAccount, connect.CodeInvalidArgument},
		{budget.ErrMissingKey, connect.CodeInvalidArgument},
		{budget.ErrInvalidAmount, connect.CodeInvalidArgument},
		{budget.ErrOverflow, connect.CodeInvalidArgument},
		{budget.ErrCurrency, connect.CodeInvalidArgument},
		{budget.ErrInvalidRequest, connect.CodeInvalidArgument},
		{budget.ErrUnknownAccount, connect.CodeNotFound},
		{budget.ErrKeyReuse, connect.CodeAlreadyExists},
		{budget.ErrNotHeld, connect.CodeFailedPrecondition},
		{budget.ErrAlreadyClosed, connect.CodeFailedPrecondition},
		{budget.ErrLimitNotValid, connect.CodeFailedPrecondition},
		{budget.ErrTooManyHolds, connect.CodeFailedPrecondition},
		{ledger.ErrNoContract, connect.CodeFailedPrecondition},
		{ledger.ErrBudgetDenied, connect.CodeFailedPrecondition},
		{ledger.ErrDeadlineAhead, connect.CodeFailedPrecondition},
		{ledger.ErrKeyReuse, connect.CodeAlreadyExists},
		{ledger.ErrNotFound, connect.CodeNotFound},
		{ledger.ErrContended, connect.CodeAborted},
		{ledger.ErrConflict, connect.CodeAborted},
		{ledger.ErrAppendUnknown, connect.CodeUnavailable},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{context.Canceled, connect.CodeCanceled},
		{ledger.ErrCorrupt, connect.CodeInternal},
		{errors.New("something else"), connect.CodeInternal},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("begin deploy_release: %w", tc.err)} {
			got := connectError(err)
			var ce *connect.Error
			if !errors.As(got, &ce) || ce.Code() != tc.code {
				t.Errorf("%v: %v, want %v", err, connect.CodeOf(got), tc.code)
				continue
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("%v: the cause is lost", err)
			}
		}
	}
}
