// Package gateway serves the ledger over Connect RPC: it converts protobuf
// requests into ledger calls and ledger errors into Connect codes (in one
// function, errors.go). It holds no rules of its own.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/auth"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/toolcall"
	"google.golang.org/protobuf/encoding/protojson"
)

// ExecutionService implements portcullis.v1.ExecutionService on a ledger.Service.
type ExecutionService struct {
	Ledger *ledger.Service
	// Tools binds Begin's action to the tool definitions, exactly as /mcp
	// does (nil: the action is taken as sent).
	Tools *toolcall.Binder
}

var _ portcullisv1connect.ExecutionServiceHandler = (*ExecutionService)(nil)

// Begin accepts or attaches one tool call.
func (s *ExecutionService) Begin(ctx context.Context, req *connect.Request[pb.BeginRequest]) (*connect.Response[pb.BeginResponse], error) {
	m := req.Msg
	a := m.GetAction()
	if a == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("action is required"))
	}
	args, err := arguments(a)
	if err != nil {
		return nil, err
	}
	action, err := s.Tools.Bind(toolcall.Request{
		Actor: a.GetActor(), Tool: a.GetTool(), Channel: a.GetChannel(), Target: a.GetTarget(),
		CredentialRef: a.GetCredentialRef(), Method: a.GetMethod(), Arguments: args, IntentScope: a.GetIntentScope(),
	})
	if err != nil {
		return nil, connectError(err)
	}
	corr, err := correlation(ctx, m.GetCorrelation())
	if err != nil {
		return nil, err
	}
	res, err := s.Ledger.Begin(ctx, ledger.BeginInput{
		Action:       action,
		OperationKey: m.GetOperationKey(),
		Correlation:  corr,
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.BeginResponse{
		Decision: res.Decision, Execution: res.Execution, Recovery: res.Recovery, Reason: res.Reason,
	}), nil
}

// correlation is the call's correlation with the authenticated caller in
// it, so the ACCEPTED or ATTACHED event names who sent the call (without
// callers configured, the local operator).
func correlation(ctx context.Context, c *pb.Correlation) (*pb.Correlation, error) {
	out := &pb.Correlation{JsonrpcId: c.GetJsonrpcId(), SessionId: c.GetSessionId()}
	if auth.FromContext(ctx) == nil {
		return out, nil // no authentication in front (the package's own tests)
	}
	name, err := author(ctx, "correlation.caller", c.GetCaller())
	if err != nil {
		return nil, err
	}
	out.Caller = name
	return out, nil
}

// arguments is the action's raw JSON: arguments_json as sent (every digit
// of every number kept), else the Struct (whose numbers are doubles).
func arguments(a *pb.Action) ([]byte, error) {
	switch {
	case a.GetArgumentsJson() != "" && a.GetArguments() != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("action.arguments and action.arguments_json are both set; send one (arguments_json keeps exact numbers)"))
	case a.GetArgumentsJson() != "":
		return []byte(a.GetArgumentsJson()), nil
	case a.GetArguments() != nil:
		args, err := protojson.Marshal(a.GetArguments())
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("action.arguments: %w", err))
		}
		return args, nil
	}
	return nil, nil
}

func (s *ExecutionService) change(ctx context.Context, id string, t pb.EventType, evidence string, apply func(*pb.Execution)) (*pb.Execution, error) {
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: t, Apply: apply, Evidence: evidence})
	if err != nil {
		return nil, connectError(err)
	}
	return x, nil
}

// Authorize records the authorization of an execution.
func (s *ExecutionService) Authorize(ctx context.Context, req *connect.Request[pb.AuthorizeRequest]) (*connect.Response[pb.AuthorizeResponse], error) {
	by, err := author(ctx, "by", req.Msg.GetBy())
	if err != nil {
		return nil, err
	}
	x, err := s.change(ctx, req.Msg.GetExecutionId(), pb.EventType_EVENT_TYPE_AUTHORIZED, "", func(x *pb.Execution) { x.AuthorizedBy = by })
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.AuthorizeResponse{Execution: x}), nil
}

// Deny records that an execution must not be dispatched.
func (s *ExecutionService) Deny(ctx context.Context, req *connect.Request[pb.DenyRequest]) (*connect.Response[pb.DenyResponse], error) {
	m := req.Msg
	if err := checkText("reason", m.GetReason()); err != nil {
		return nil, err
	}
	by, err := author(ctx, "by", m.GetBy())
	if err != nil {
		return nil, err
	}
	// Only an execution nobody authorized yet, or one that could not be
	// sent (not resumed, then): an authorization is not overwritten by a
	// later or racing denial. The authorizer of a NOT_SENT execution stays
	// on the record; the reason names the denier.
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: m.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DENIED,
		Require: undecided(pb.EventType_EVENT_TYPE_DENIED, pb.State_STATE_ACCEPTED, pb.State_STATE_AWAITING_APPROVAL, pb.State_STATE_NOT_SENT),
		Apply: func(x *pb.Execution) {
			x.Reason = m.GetReason()
			if x.GetAuthorizedBy() == "" {
				x.AuthorizedBy = by
				return
			}
			x.Reason = "denied by " + by + " after authorization by " + x.GetAuthorizedBy() + ": " + m.GetReason()
		}})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.DenyResponse{Execution: x}), nil
}

// MarkDispatched wins the right to send to the target; exactly one caller
// wins. A retry with the winner's dispatch_token is answered as the winner
// was; the DISPATCHED record carries the dispatch deadline.
func (s *ExecutionService) MarkDispatched(ctx context.Context, req *connect.Request[pb.MarkDispatchedRequest]) (*connect.Response[pb.MarkDispatchedResponse], error) {
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: req.Msg.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DISPATCHED,
		DispatchToken: req.Msg.GetDispatchToken()})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.MarkDispatchedResponse{Execution: x}), nil
}

// MarkNotSent records that no byte reached the target.
func (s *ExecutionService) MarkNotSent(ctx context.Context, req *connect.Request[pb.MarkNotSentRequest]) (*connect.Response[pb.MarkNotSentResponse], error) {
	m := req.Msg
	if err := checkText("reason", m.GetReason()); err != nil {
		return nil, err
	}
	x, err := s.change(ctx, m.GetExecutionId(), pb.EventType_EVENT_TYPE_NOT_SENT, "", func(x *pb.Execution) { x.Reason = m.GetReason() })
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MarkNotSentResponse{Execution: x}), nil
}

// RecordResult records the target's answer; error statuses are results too.
func (s *ExecutionService) RecordResult(ctx context.Context, req *connect.Request[pb.RecordResultRequest]) (*connect.Response[pb.RecordResultResponse], error) {
	m := req.Msg
	if err := checkResult(m.GetResultBody(), m.GetResultContentType()); err != nil {
		return nil, err
	}
	apply := func(x *pb.Execution) { setResult(x, m.GetTargetStatus(), m.GetResultBody(), m.GetResultContentType()) }
	x, err := s.Ledger.Transition(ctx, ledger.Change{ExecutionID: m.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_RESULT_OBSERVED, Apply: apply})
	var ite *ledger.IllegalTransitionError
	if errors.As(err, &ite) && ite.State == pb.State_STATE_OUTCOME_UNKNOWN {
		// A late answer (the deadline sweep, or the executor itself, had
		// recorded the outcome unknown) is not lost: it resolves the
		// execution as completed, as a gateway's own late result does.
		evidence := "the executor reported the target's answer after the outcome was recorded unknown"
		if p := auth.FromContext(ctx); p != nil {
			evidence = "the executor " + p.Name + " reported the target's answer after the outcome was recorded unknown"
		}
		x, err = s.Ledger.Transition(ctx, ledger.Change{ExecutionID: m.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED,
			Apply: apply, Evidence: evidence})
	}
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.RecordResultResponse{Execution: x}), nil
}

// RecordOutcomeUnknown records that the target may or may not have acted.
func (s *ExecutionService) RecordOutcomeUnknown(ctx context.Context, req *connect.Request[pb.RecordOutcomeUnknownRequest]) (*connect.Response[pb.RecordOutcomeUnknownResponse], error) {
	m := req.Msg
	if err := checkText("reason", m.GetReason()); err != nil {
		return nil, err
	}
	x, err := s.change(ctx, m.GetExecutionId(), pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, "", func(x *pb.Execution) { x.Reason = m.GetReason() })
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.RecordOutcomeUnknownResponse{Execution: x}), nil
}

// MarkDelivered records that the agent received the result.
func (s *ExecutionService) MarkDelivered(ctx context.Context, req *connect.Request[pb.MarkDeliveredRequest]) (*connect.Response[pb.MarkDeliveredResponse], error) {
	x, err := s.change(ctx, req.Msg.GetExecutionId(), pb.EventType_EVENT_TYPE_DELIVERED, "", nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.MarkDeliveredResponse{Execution: x}), nil
}

// Resolve settles an unknown outcome with evidence.
func (s *ExecutionService) Resolve(ctx context.Context, req *connect.Request[pb.ResolveRequest]) (*connect.Response[pb.ResolveResponse], error) {
	m := req.Msg
	if err := checkText("evidence", m.GetEvidence()); err != nil {
		return nil, err
	}
	if r := m.GetResolution(); r != pb.Resolution_RESOLUTION_COMPLETED && r != pb.Resolution_RESOLUTION_NOT_EXECUTED {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("resolution must be RESOLUTION_COMPLETED or RESOLUTION_NOT_EXECUTED"))
	}
	if strings.TrimSpace(m.GetEvidence()) == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("evidence is required: what shows the outcome (the status endpoint's answer, a marker, a person's check)"))
	}
	by, err := author(ctx, "by", m.GetBy())
	if err != nil {
		return nil, err
	}
	var t pb.EventType
	switch m.GetResolution() {
	case pb.Resolution_RESOLUTION_COMPLETED:
		t = pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED
		if err := checkResult(m.GetResultBody(), m.GetResultContentType()); err != nil {
			return nil, err
		}
	case pb.Resolution_RESOLUTION_NOT_EXECUTED:
		t = pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("resolution must be RESOLUTION_COMPLETED or RESOLUTION_NOT_EXECUTED"))
	}
	evidence := "by " + by + ": " + m.GetEvidence()
	x, err := s.change(ctx, m.GetExecutionId(), t, evidence, func(x *pb.Execution) {
		if t == pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED {
			setResult(x, m.GetTargetStatus(), m.GetResultBody(), m.GetResultContentType())
		} else {
			x.Reason = "resolved not executed: " + evidence
		}
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ResolveResponse{Execution: x}), nil
}

// GetExecution reads one execution from the log.
func (s *ExecutionService) GetExecution(ctx context.Context, req *connect.Request[pb.GetExecutionRequest]) (*connect.Response[pb.GetExecutionResponse], error) {
	x, err := s.Ledger.Get(ctx, req.Msg.GetExecutionId())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.GetExecutionResponse{Execution: x}), nil
}

// ListExecutions pages through executions from the views, newest first.
func (s *ExecutionService) ListExecutions(ctx context.Context, req *connect.Request[pb.ListExecutionsRequest]) (*connect.Response[pb.ListExecutionsResponse], error) {
	m := req.Msg
	xs, next, err := s.Ledger.List(ctx, ledger.ListQuery{PageSize: int(m.GetPageSize()), PageToken: m.GetPageToken(), State: m.GetState(), Tool: m.GetTool()})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.ListExecutionsResponse{Executions: xs, NextPageToken: next}), nil
}

func setResult(x *pb.Execution, status int32, body, contentType string) {
	x.TargetStatus = status
	x.ResultBody = body
	x.ResultContentType = contentType
	x.ResultReference = "result_" + x.GetExecutionId()[len("act_"):]
}

func checkResult(body, contentType string) error {
	if len(body) > ledger.MaxResultBodyBytes {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("result_body is %d bytes; the limit is %d", len(body), ledger.MaxResultBodyBytes))
	}
	return checkText("result_content_type", contentType)
}

// checkText bounds free-text fields (pairs of name, value).
func checkText(nv ...string) error {
	for i := 0; i+1 < len(nv); i += 2 {
		if len(nv[i+1]) > ledger.MaxFieldBytes {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is longer than %d bytes", nv[i], ledger.MaxFieldBytes))
		}
	}
	return nil
}
