package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// rules is the roles table: the roles that may call each procedure (any one
// suffices). A procedure missing here is refused to everyone but the local
// operator. docs/auth.md prints the same table.
var rules = map[string][]Role{
	svc.ExecutionServiceBeginProcedure:                {Executor},
	svc.ExecutionServiceMarkDispatchedProcedure:       {Executor},
	svc.ExecutionServiceMarkNotSentProcedure:          {Executor},
	svc.ExecutionServiceRecordResultProcedure:         {Executor},
	svc.ExecutionServiceRecordOutcomeUnknownProcedure: {Executor},
	svc.ExecutionServiceMarkDeliveredProcedure:        {Executor},
	svc.ExecutionServiceAuthorizeProcedure:            {Approver},
	svc.ExecutionServiceDenyProcedure:                 {Approver},
	svc.ExecutionServiceResolveProcedure:              {Approver},
	svc.ExecutionServiceGetExecutionProcedure:         {Analyst, Approver, Executor},
	svc.ExecutionServiceListExecutionsProcedure:       {Analyst},

	svc.ApprovalServiceListPendingProcedure: {Approver},
	svc.ApprovalServiceApproveProcedure:     {Approver},
	svc.ApprovalServiceDenyProcedure:        {Approver},

	svc.BudgetServiceSetLimitProcedure:      {BudgetAdmin},
	svc.BudgetServiceReserveProcedure:       {Executor, BudgetAdmin},
	svc.BudgetServiceSettleProcedure:        {Executor},
	svc.BudgetServiceReleaseProcedure:       {Executor},
	svc.BudgetServiceGetAccountProcedure:    {Finance, BudgetAdmin},
	svc.BudgetServiceListHoldsProcedure:     {Finance, BudgetAdmin},
	svc.BudgetServiceListDecisionsProcedure: {Finance, BudgetAdmin},

	svc.AuditServiceInvestigateProcedure:    {Analyst},
	svc.AuditServiceListQuarantineProcedure: {Analyst},
}

// RolesFor returns the roles that may call procedure (nil: nobody but the
// local operator).
func RolesFor(procedure string) []Role { return slices.Clone(rules[procedure]) }

// Procedures returns every procedure the roles table covers, sorted.
func Procedures() []string {
	out := make([]string, 0, len(rules))
	for p := range rules {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ExecutionActor returns the actor of a recorded execution; the policy uses
// it to keep an executor to the actors it acts for.
type ExecutionActor func(ctx context.Context, executionID string) (string, error)

// Policy applies the roles table and the rules no table can hold: an
// executor acts only for its actors and only on its accounts, an override
// needs budget_admin, and every `by`, `delegator` and override author in a
// request is the caller or empty.
type Policy struct {
	ExecutionActor ExecutionActor
}

// Check decides, before the handler runs, whether p may call procedure with
// msg. A refusal wraps ErrPermissionDenied.
func (pol Policy) Check(ctx context.Context, p *Principal, procedure string, msg any) error {
	if err := checkClaims(p, msg); err != nil {
		return err
	}
	if p.Local {
		return nil
	}
	allowed := rules[procedure]
	if m, ok := msg.(*pb.ReserveRequest); ok {
		// An override is budget_admin's; a plain reservation is an executor's.
		if m.GetOverride() != nil {
			if !p.Has(BudgetAdmin) {
				return denied(p, "may not override a budget (needs role %s)", BudgetAdmin)
			}
			return nil
		}
		if !p.Has(Executor) {
			return denied(p, "may not reserve budget without an override (needs role %s)", Executor)
		}
		return pol.account(p, m.GetAccount())
	}
	if !slices.ContainsFunc(allowed, p.Has) {
		return denied(p, "may not call %s (needs role %s)", procedure, roleList(allowed))
	}
	// Scope rules apply where the caller's access comes only from executor.
	if slices.ContainsFunc(allowed, func(r Role) bool { return r != Executor && p.Has(r) }) {
		return nil
	}
	switch m := msg.(type) {
	case *pb.BeginRequest:
		if actor := m.GetAction().GetActor(); !p.MayActFor(actor) {
			return denied(p, "does not act for actor %q (acts_for: %s)", actor, strings.Join(p.ActsFor, ", "))
		}
	case *pb.SettleRequest:
		return pol.account(p, m.GetAccount())
	case *pb.ReleaseRequest:
		return pol.account(p, m.GetAccount())
	case *pb.GetExecutionRequest:
		// Checked on the response (CheckResponse): the read gives the actor.
	case interface{ GetExecutionId() string }:
		return pol.execution(ctx, p, m.GetExecutionId())
	}
	return nil
}

// CheckResponse decides whether p may see resp: an executor reads only the
// executions of the actors it acts for.
func (pol Policy) CheckResponse(p *Principal, procedure string, resp any) error {
	m, ok := resp.(*pb.GetExecutionResponse)
	if !ok || p.Local || p.Has(Analyst) || p.Has(Approver) {
		return nil
	}
	if actor := m.GetExecution().GetActor(); !p.MayActFor(actor) {
		return denied(p, "does not act for actor %q, whose execution this is", actor)
	}
	return nil
}

func (pol Policy) account(p *Principal, account string) error {
	if !p.MayUseAccount(account) {
		return denied(p, "may not use budget account %q (an executor uses the accounts its tools' contracts name, and its accounts:)", account)
	}
	return nil
}

func (pol Policy) execution(ctx context.Context, p *Principal, id string) error {
	if pol.ExecutionActor == nil {
		return denied(p, "cannot be checked against execution %s", id)
	}
	actor, err := pol.ExecutionActor(ctx, id)
	if err != nil {
		return denied(p, "cannot be checked against execution %s: %v", id, err)
	}
	if !p.MayActFor(actor) {
		return denied(p, "does not act for actor %q, whose execution %s is", actor, id)
	}
	return nil
}

// checkClaims refuses a request that names someone other than the caller
// as its author. An empty field is filled from the principal by the handler.
func checkClaims(p *Principal, msg any) error {
	field, claimed := "", ""
	switch m := msg.(type) {
	case interface{ GetBy() string }:
		field, claimed = "by", m.GetBy()
	case *pb.SetLimitRequest:
		field, claimed = "delegator", m.GetDelegator()
	case *pb.ReserveRequest:
		field, claimed = "override.by", m.GetOverride().GetBy()
	case *pb.BeginRequest:
		field, claimed = "correlation.caller", m.GetCorrelation().GetCaller()
	}
	if claimed != "" && claimed != p.Name {
		return denied(p, "may not record %s %q: it is always the authenticated caller (leave it empty)", field, claimed)
	}
	return nil
}

func denied(p *Principal, format string, args ...any) error {
	return fmt.Errorf("%w: caller %s %s", ErrPermissionDenied, p.Name, fmt.Sprintf(format, args...))
}

func roleList(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}
