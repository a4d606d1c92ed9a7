package gateway

import (
	"context"
	"fmt"
	"slices"

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
}

var _ portcullisv1connect.ApprovalServiceHandler = (*ApprovalService)(nil)

// ListPending lists executions waiting for a person, oldest first.
func (s *ApprovalService) ListPending(ctx context.Context, req *connect.Request[pb.ListPendingRequest]) (*connect.Response[pb.ListPendingResponse], error) {
	xs, _, err := s.Ledger.List(ctx, ledger.ListQuery{PageSize: int(req.Msg.GetPageSize()), State: pb.State_STATE_AWAITING_APPROVAL})
	if err != nil {
		return nil, connectError(err)
	}
	slices.Reverse(xs)
	return connect.NewResponse(&pb.ListPendingResponse{Executions: xs}), nil
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
	cur, err := s.Ledger.Get(ctx, id)
	if err != nil {
		return nil, connectError(err)
	}
	if cur.GetState() != pb.State_STATE_AWAITING_APPROVAL {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("execution %s is in %s, not waiting for approval", id, cur.GetState()))
	}
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: t, Apply: apply})
	if err != nil {
		return nil, connectError(err)
	}
	return x, nil
}
