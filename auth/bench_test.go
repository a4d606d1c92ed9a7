package auth

import (
	"context"
	"fmt"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// BenchmarkAuthorizeBegin is what the interceptor adds to one Begin: parse
// the header, hash the token, find the caller, apply the policy.
func BenchmarkAuthorizeBegin(b *testing.B) {
	callers := make([]Caller, 0, 100)
	for i := range 100 {
		callers = append(callers, Caller{Name: fmt.Sprintf("runner-%d", i), TokenSHA256: sum(fmt.Sprintf("token-%d", i)), Roles: []Role{Executor}, ActsFor: []string{"agent-7"}})
	}
	callers = append(callers, Caller{Name: "deploy-runner", TokenSHA256: sum("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), Roles: []Role{Executor}, ActsFor: []string{"agent-1", "agent-7"}})
	a, err := New(callers, nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := &pb.BeginRequest{Action: &pb.Action{Actor: "agent-7"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := a.Authenticate("Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := (Policy{}).Check(ctx, p, svc.ExecutionServiceBeginProcedure, msg); err != nil {
			b.Fatal(err)
		}
	}
}
