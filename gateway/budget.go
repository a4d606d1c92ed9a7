package gateway

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// DecisionLister pages through an account's recorded decisions (the views).
type DecisionLister interface {
	ListDecisions(ctx context.Context, account string, before uint64, size int) ([]*pb.BudgetDecision, uint64, error)
	BudgetWaitFor(ctx context.Context, seq uint64) error
}

// listWaitMax bounds how long ListDecisions waits for the views.
const listWaitMax = 5 * time.Second

// BudgetService implements portcullis.v1.BudgetService on a keeper.
type BudgetService struct {
	Keeper    *keeper.Keeper
	Decisions DecisionLister
}

var _ portcullisv1connect.BudgetServiceHandler = (*BudgetService)(nil)

// SetLimit creates an account or replaces its limit.
func (s *BudgetService) SetLimit(ctx context.Context, req *connect.Request[pb.SetLimitRequest]) (*connect.Response[pb.SetLimitResponse], error) {
	m := req.Msg
	delegator, err := author(ctx, "delegator", m.GetDelegator())
	if err != nil {
		return nil, err
	}
	l := budget.Limit{Account: m.GetAccount(), Currency: m.GetCurrency(), Limit: m.GetLimit(), Delegator: delegator}
	if m.GetValidFrom() != nil {
		l.ValidFrom = m.GetValidFrom().AsTime()
	}
	if m.GetValidUntil() != nil {
		l.ValidUntil = m.GetValidUntil().AsTime()
	}
	res, err := s.Keeper.SetLimit(ctx, l)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SetLimitResponse{Account: keeper.AccountProto(res.Account)}), nil
}

// Reserve decides a reservation; a denial is an answer with allowed=false.
func (s *BudgetService) Reserve(ctx context.Context, req *connect.Request[pb.ReserveRequest]) (*connect.Response[pb.ReserveResponse], error) {
	m := req.Msg
	r := budget.ReserveRequest{OperationKey: m.GetOperationKey(), RequestDigest: m.GetRequestDigest(), Amount: m.GetAmount(), Currency: m.GetCurrency()}
	if o := m.GetOverride(); o != nil {
		by, err := author(ctx, "override.by", o.GetBy())
		if err != nil {
			return nil, err
		}
		r.Override = &budget.Override{By: by, Reason: o.GetReason()}
	}
	res, _, err := s.Keeper.Reserve(ctx, m.GetAccount(), r)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.ReserveResponse{Decision: res.Decision, Account: keeper.AccountProto(res.Account)}), nil
}

func evidence(e *pb.Evidence) budget.Evidence {
	return budget.Evidence{ExecutionID: e.GetExecutionId(), TargetStatus: e.GetTargetStatus(), Note: e.GetNote()}
}

// Settle moves a hold to spent.
func (s *BudgetService) Settle(ctx context.Context, req *connect.Request[pb.SettleRequest]) (*connect.Response[pb.SettleResponse], error) {
	m := req.Msg
	res, err := s.Keeper.Settle(ctx, m.GetAccount(), m.GetOperationKey(), m.GetAmount(), evidence(m.GetEvidence()))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SettleResponse{Decision: res.Decision, Account: keeper.AccountProto(res.Account)}), nil
}

// Release ends a hold without spending.
func (s *BudgetService) Release(ctx context.Context, req *connect.Request[pb.ReleaseRequest]) (*connect.Response[pb.ReleaseResponse], error) {
	m := req.Msg
	res, err := s.Keeper.Release(ctx, m.GetAccount(), m.GetOperationKey(), evidence(m.GetEvidence()))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.ReleaseResponse{Decision: res.Decision, Account: keeper.AccountProto(res.Account)}), nil
}

// GetAccount reads an account.
func (s *BudgetService) GetAccount(ctx context.Context, req *connect.Request[pb.GetAccountRequest]) (*connect.Response[pb.GetAccountResponse], error) {
	h, err := s.Keeper.Account(ctx, req.Msg.GetAccount())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.GetAccountResponse{Account: keeper.AccountProto(h.Account)}), nil
}

// ListHolds lists an account's open holds.
func (s *BudgetService) ListHolds(ctx context.Context, req *connect.Request[pb.ListHoldsRequest]) (*connect.Response[pb.ListHoldsResponse], error) {
	h, err := s.Keeper.Account(ctx, req.Msg.GetAccount())
	if err != nil {
		return nil, connectError(err)
	}
	out := &pb.ListHoldsResponse{Held: h.Account.Held}
	for _, x := range h.Account.OpenHolds() {
		out.Holds = append(out.Holds, &pb.Hold{OperationKey: x.OperationKey, RequestDigest: x.RequestDigest, Amount: x.Amount})
	}
	return connect.NewResponse(out), nil
}

// ListDecisions pages through an account's decisions, newest first.
func (s *BudgetService) ListDecisions(ctx context.Context, req *connect.Request[pb.ListDecisionsRequest]) (*connect.Response[pb.ListDecisionsResponse], error) {
	m := req.Msg
	size := int(m.GetPageSize())
	if size < 0 || size > 1000 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("page_size must be between 0 and 1000"))
	}
	if size == 0 {
		size = 100
	}
	var before uint64
	if t := m.GetPageToken(); t != "" {
		var err error
		if before, err = strconv.ParseUint(t, 10, 64); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("bad page_token"))
		}
	}
	h, err := s.Keeper.Account(ctx, m.GetAccount())
	if err != nil {
		return nil, connectError(err)
	}
	// Read your writes: the list comes from the views, which may lag this
	// gateway's own last decision on the account.
	wctx, cancel := context.WithTimeout(ctx, listWaitMax)
	defer cancel()
	if err := s.Decisions.BudgetWaitFor(wctx, h.Seq); err != nil {
		return nil, connectError(err)
	}
	ds, next, err := s.Decisions.ListDecisions(ctx, m.GetAccount(), before, size)
	if err != nil {
		return nil, connectError(err)
	}
	out := &pb.ListDecisionsResponse{Decisions: ds}
	if next > 0 {
		out.NextPageToken = strconv.FormatUint(next, 10)
	}
	return connect.NewResponse(out), nil
}
