package auth

import (
	"context"
	"errors"
	"slices"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Every RPC of every service has a row in the roles table: a new RPC
// without one would be refused to every caller, and this says so first.
func TestEveryProcedureHasRoles(t *testing.T) {
	var all []string
	for _, fd := range []protoreflect.FileDescriptor{pb.File_portcullis_v1_execution_proto, pb.File_portcullis_v1_budget_proto,
		pb.File_portcullis_v1_approval_proto, pb.File_portcullis_v1_audit_proto} {
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			for j := range s.Methods().Len() {
				all = append(all, "/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name()))
			}
		}
	}
	slices.Sort(all)
	if got := Procedures(); !slices.Equal(got, all) {
		t.Fatalf("roles table covers\n  %v\nthe services have\n  %v", got, all)
	}
}

// The roles of docs/design.md: for each role, exactly these RPCs (message rules aside).
func TestRolesTable(t *testing.T) {
	want := map[Role][]string{
		Executor: {svc.ExecutionServiceBeginProcedure, svc.ExecutionServiceMarkDispatchedProcedure, svc.ExecutionServiceMarkNotSentProcedure,
			svc.ExecutionServiceRecordResultProcedure, svc.ExecutionServiceRecordOutcomeUnknownProcedure, svc.ExecutionServiceMarkDeliveredProcedure,
			svc.ExecutionServiceGetExecutionProcedure, svc.BudgetServiceReserveProcedure, svc.BudgetServiceSettleProcedure, svc.BudgetServiceReleaseProcedure},
		Approver: {svc.ExecutionServiceAuthorizeProcedure, svc.ExecutionServiceDenyProcedure, svc.ExecutionServiceResolveProcedure,
			svc.ExecutionServiceGetExecutionProcedure, svc.ApprovalServiceListPendingProcedure, svc.ApprovalServiceApproveProcedure, svc.ApprovalServiceDenyProcedure},
		Finance:     {svc.BudgetServiceGetAccountProcedure, svc.BudgetServiceListHoldsProcedure, svc.BudgetServiceListDecisionsProcedure},
		BudgetAdmin: {svc.BudgetServiceSetLimitProcedure, svc.BudgetServiceReserveProcedure, svc.BudgetServiceGetAccountProcedure, svc.BudgetServiceListHoldsProcedure, svc.BudgetServiceListDecisionsProcedure},
		Analyst:     {svc.ExecutionServiceGetExecutionProcedure, svc.ExecutionServiceListExecutionsProcedure, svc.AuditServiceInvestigateProcedure, svc.AuditServiceListQuarantineProcedure},
	}
	for role, procs := range want {
		var got []string
		for _, proc := range Procedures() {
			if slices.Contains(RolesFor(proc), role) {
				got = append(got, proc)
			}
		}
		slices.Sort(got)
		slices.Sort(procs)
		if !slices.Equal(got, procs) {
			t.Errorf("%s may call\n  %v\nwant\n  %v", role, got, procs)
		}
	}
}

var actors = map[string]string{"act_mine": "agent-7", "act_theirs": "agent-9"}

func lookup(_ context.Context, id string) (string, error) {
	if a, ok := actors[id]; ok {
		return a, nil
	}
	return "", errors.New("not found")
}

func TestPolicyCheck(t *testing.T) {
	pol := Policy{ExecutionActor: lookup}
	runner := &Principal{Name: "deploy-runner", Roles: []Role{Executor}, ActsFor: []string{"agent-7"}, Accounts: []string{"ops"}}
	alice := &Principal{Name: "alice", Roles: []Role{Approver}}
	cfo := &Principal{Name: "cfo", Roles: []Role{BudgetAdmin}}
	fin := &Principal{Name: "finance-bot", Roles: []Role{Finance}}
	analyst := &Principal{Name: "analyst-1", Roles: []Role{Analyst}}
	local := &Principal{Name: LocalOperator, Local: true}
	begin := func(actor string) *pb.BeginRequest { return &pb.BeginRequest{Action: &pb.Action{Actor: actor}} }
	tests := []struct {
		name string
		p    *Principal
		proc string
		msg  any
		ok   bool
	}{
		{"executor begins for its actor", runner, svc.ExecutionServiceBeginProcedure, begin("agent-7"), true},
		{"executor begins for another actor", runner, svc.ExecutionServiceBeginProcedure, begin("agent-9"), false},
		{"executor names itself as the caller", runner, svc.ExecutionServiceBeginProcedure, &pb.BeginRequest{Action: &pb.Action{Actor: "agent-7"}, Correlation: &pb.Correlation{Caller: runner.Name}}, true},
		{"executor names another caller", runner, svc.ExecutionServiceBeginProcedure, &pb.BeginRequest{Action: &pb.Action{Actor: "agent-7"}, Correlation: &pb.Correlation{Caller: "alice"}}, false},
		{"executor dispatches its actor's execution", runner, svc.ExecutionServiceMarkDispatchedProcedure, &pb.MarkDispatchedRequest{ExecutionId: "act_mine"}, true},
		{"executor dispatches another actor's execution", runner, svc.ExecutionServiceMarkDispatchedProcedure, &pb.MarkDispatchedRequest{ExecutionId: "act_theirs"}, false},
		{"executor records on an unknown execution", runner, svc.ExecutionServiceRecordResultProcedure, &pb.RecordResultRequest{ExecutionId: "act_none"}, false},
		{"executor authorizes (approval bypass)", runner, svc.ExecutionServiceAuthorizeProcedure, &pb.AuthorizeRequest{ExecutionId: "act_mine"}, false},
		{"executor approves (approval bypass)", runner, svc.ApprovalServiceApproveProcedure, &pb.ApproveRequest{ExecutionId: "act_mine"}, false},
		{"executor reserves on its tools' account", runner, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "ops"}, true},
		{"executor reserves on another account", runner, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "hr"}, false},
		{"executor settles on another account", runner, svc.BudgetServiceSettleProcedure, &pb.SettleRequest{Account: "hr"}, false},
		{"executor releases on its account", runner, svc.BudgetServiceReleaseProcedure, &pb.ReleaseRequest{Account: "ops"}, true},
		{"executor overrides", runner, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "ops", Override: &pb.Override{Reason: "x"}}, false},
		{"executor sets a limit", runner, svc.BudgetServiceSetLimitProcedure, &pb.SetLimitRequest{Account: "ops"}, false},
		{"executor lists executions", runner, svc.ExecutionServiceListExecutionsProcedure, &pb.ListExecutionsRequest{}, false},
		{"approver authorizes", alice, svc.ExecutionServiceAuthorizeProcedure, &pb.AuthorizeRequest{ExecutionId: "act_theirs"}, true},
		{"approver authorizes as someone else", alice, svc.ExecutionServiceAuthorizeProcedure, &pb.AuthorizeRequest{ExecutionId: "act_theirs", By: "bob"}, false},
		{"approver names herself", alice, svc.ApprovalServiceApproveProcedure, &pb.ApproveRequest{ExecutionId: "act_theirs", By: "alice"}, true},
		{"approver begins", alice, svc.ExecutionServiceBeginProcedure, begin("agent-7"), false},
		{"approver reserves", alice, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "ops"}, false},
		{"budget admin sets a limit", cfo, svc.BudgetServiceSetLimitProcedure, &pb.SetLimitRequest{Account: "hr"}, true},
		{"budget admin names another delegator", cfo, svc.BudgetServiceSetLimitProcedure, &pb.SetLimitRequest{Account: "hr", Delegator: "ceo"}, false},
		{"budget admin overrides", cfo, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "hr", Override: &pb.Override{Reason: "q4"}}, true},
		{"budget admin overrides as someone else", cfo, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "hr", Override: &pb.Override{By: "ceo"}}, false},
		{"budget admin reserves without an override", cfo, svc.BudgetServiceReserveProcedure, &pb.ReserveRequest{Account: "hr"}, false},
		{"budget admin reads", cfo, svc.BudgetServiceListDecisionsProcedure, &pb.ListDecisionsRequest{}, true},
		{"finance reads", fin, svc.BudgetServiceGetAccountProcedure, &pb.GetAccountRequest{}, true},
		{"finance sets a limit", fin, svc.BudgetServiceSetLimitProcedure, &pb.SetLimitRequest{}, false},
		{"finance reads executions", fin, svc.ExecutionServiceGetExecutionProcedure, &pb.GetExecutionRequest{}, false},
		{"analyst investigates", analyst, svc.AuditServiceInvestigateProcedure, &pb.InvestigateRequest{}, true},
		{"analyst lists", analyst, svc.ExecutionServiceListExecutionsProcedure, &pb.ListExecutionsRequest{}, true},
		{"analyst resolves", analyst, svc.ExecutionServiceResolveProcedure, &pb.ResolveRequest{}, false},
		{"unknown procedure", analyst, "/portcullis.v1.X/Y", nil, false},
		{"local operator", local, svc.BudgetServiceSetLimitProcedure, &pb.SetLimitRequest{}, true},
		{"local operator as someone else", local, svc.ApprovalServiceApproveProcedure, &pb.ApproveRequest{By: "alice"}, false},
	}
	for _, tc := range tests {
		err := pol.Check(context.Background(), tc.p, tc.proc, tc.msg)
		if tc.ok != (err == nil) {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrPermissionDenied) {
			t.Errorf("%s: %v is not ErrPermissionDenied", tc.name, err)
		}
	}
}

func TestPolicyCheckResponse(t *testing.T) {
	pol := Policy{}
	runner := &Principal{Name: "deploy-runner", Roles: []Role{Executor}, ActsFor: []string{"agent-7"}}
	both := &Principal{Name: "ops", Roles: []Role{Executor, Analyst}}
	res := func(actor string) *pb.GetExecutionResponse {
		return &pb.GetExecutionResponse{Execution: &pb.Execution{Actor: actor}}
	}
	proc := svc.ExecutionServiceGetExecutionProcedure
	if err := pol.CheckResponse(runner, proc, res("agent-7")); err != nil {
		t.Errorf("own actor: %v", err)
	}
	if err := pol.CheckResponse(runner, proc, res("agent-9")); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("another actor: %v", err)
	}
	if err := pol.CheckResponse(both, proc, res("agent-9")); err != nil {
		t.Errorf("an analyst reads every execution: %v", err)
	}
}
