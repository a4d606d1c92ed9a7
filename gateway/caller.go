package gateway

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/auth"
)

// author returns the authenticated caller, which is what every `by`,
// `delegator` and override author records. claimed is the request's own
// field: empty, or the caller's name; anything else is refused, so a body
// can never speak for someone else (the interceptor refuses it first).
func author(ctx context.Context, field, claimed string) (string, error) {
	p := auth.FromContext(ctx)
	if p == nil {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("no authenticated caller"))
	}
	if claimed != "" && claimed != p.Name {
		return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %q is not the authenticated caller %s (leave it empty)", field, claimed, p.Name))
	}
	return p.Name, nil
}
