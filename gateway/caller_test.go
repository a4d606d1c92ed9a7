package gateway

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/auth"
)

// The handlers record the principal, never a body's claim, even without
// the interceptor in front of them.
func TestAuthor(t *testing.T) {
	ctx := auth.NewContext(context.Background(), &auth.Principal{Name: "alice", Roles: []auth.Role{auth.Approver}})
	if by, err := author(ctx, "by", ""); err != nil || by != "alice" {
		t.Errorf("empty by: %q, %v", by, err)
	}
	if by, err := author(ctx, "by", "alice"); err != nil || by != "alice" {
		t.Errorf("by naming the caller: %q, %v", by, err)
	}
	if _, err := author(ctx, "by", "bob"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("by naming someone else: %v", err)
	}
	if _, err := author(context.Background(), "by", ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("no principal: %v", err)
	}
}
