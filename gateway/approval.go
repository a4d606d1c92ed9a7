package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
)

// ApprovalService implements portcullis.v1.ApprovalService: approvals are
// transitions of the execution (AWAITING_APPROVAL → AUTHORIZED or DENIED),
// appended with compare-and-set like any other.
type ApprovalService struct {
	Ledger *ledger.Service
	// OnApproved, when set, is told of each approval taken here, after it
	// is durable: the MCP front door dispatches an approved task whose
	// call it holds (mcp.Gateway.Approved). It must not block.
	OnApproved func(x *pb.Execution)
}

var _ portcullisv1connect.ApprovalServiceHandler = (*ApprovalService)(nil)

// ListPending lists executions waiting for a person: pages walk from the
// newest back (next_page_token), each page oldest first.
func (s *ApprovalService) ListPending(ctx context.Context, req *connect.Request[pb.ListPendingRequest]) (*connect.Response[pb.ListPendingResponse], error) {
	xs, next, err := s.Ledger.List(ctx, ledger.ListQuery{PageSize: int(req.Msg.GetPageSize()), PageToken: req.Msg.GetPageToken(), State: pb.State_STATE_AWAITING_APPROVAL})
	if err != nil {
		return nil, connectError(err)
	}
	slices.Reverse(xs)
	return connect.NewResponse(&pb.ListPendingResponse{Executions: xs, NextPageToken: next}), nil
}

// Approve authorizes a pending execution.
func (s *ApprovalService) Approve(ctx context.Context, req *connect.Request[pb.ApproveRequest]) (*connect.Response[pb.ApproveResponse], error) {
	m := req.Msg
	by, err := author(ctx, "by", m.GetBy())
	if err != nil {
		return nil, err
	}
	x, err := s.pending(ctx, m.GetExecutionId(), pb.EventType_EVENT_TYPE_AUTHORIZED, func(x *pb.Execution) { x.AuthorizedBy = by })
	if err != nil {
		return nil, err
	}
	if s.OnApproved != nil {
		s.OnApproved(x)
	}
	return connect.NewResponse(&pb.ApproveResponse{Execution: x}), nil
}

// Deny denies a pending execution.
func (s *ApprovalService) Deny(ctx context.Context, req *connect.Request[pb.ApprovalServiceDenyRequest]) (*connect.Response[pb.ApprovalServiceDenyResponse], error) {
	m := req.Msg
	if err := checkText("reason", m.GetReason()); err != nil {
		return nil, err
	}
	by, err := author(ctx, "by", m.GetBy())
	if err != nil {
		return nil, err
	}
	x, err := s.pending(ctx, m.GetExecutionId(), pb.EventType_EVENT_TYPE_DENIED, func(x *pb.Execution) {
		x.AuthorizedBy, x.Reason = by, "denied by "+by+": "+m.GetReason()
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ApprovalServiceDenyResponse{Execution: x}), nil
}

// pending applies a person's decision, only to an execution that waits for one.
func (s *ApprovalService) pending(ctx context.Context, id string, t pb.EventType, apply func(*pb.Execution)) (*pb.Execution, error) {
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: t, Apply: apply,
		Require: undecided(t, pb.State_STATE_AWAITING_APPROVAL)})
	if err != nil {
		return nil, connectError(err)
	}
	return x, nil
}

// undecided makes "nobody has decided yet" a condition of a person's
// decision itself: Require is checked on the head that the append's
// compare-and-set is taken on, so of two racing decisions (an approval and
// a denial, two denials) exactly one lands and the other is refused with
// the state the first one left. A check before the append alone let the
// loser decide again on the winner's event under the ledger's table, which
// lets a denial follow an authorization: both callers were told they
// decided, and the denier's name replaced the approver's.
func undecided(t pb.EventType, states ...pb.State) func(*pb.Execution, time.Time) error {
	return func(x *pb.Execution, _ time.Time) error {
		if slices.Contains(states, x.GetState()) {
			return nil
		}
		err := &ledger.IllegalTransitionError{ExecutionID: x.GetExecutionId(), Event: t, State: x.GetState(), Want: states}
		if by := x.GetAuthorizedBy(); by != "" {
			return fmt.Errorf("%w (decided by %s; a person's decision stands)", err, by)
		}
		return err
	}
}
