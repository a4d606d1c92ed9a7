package gateway

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/ledger"
)

// connectError maps ledger errors to Connect codes. It is the only place
// that does.
func connectError(err error) error {
	var ite *ledger.IllegalTransitionError
	code := connect.CodeInternal
	switch {
	case errors.As(err, &ite):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, ledger.ErrInvalid):
		code = connect.CodeInvalidArgument
	case errors.Is(err, ledger.ErrNoContract):
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
