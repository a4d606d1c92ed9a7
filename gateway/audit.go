package gateway

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// AuditService implements portcullis.v1.AuditService.
type AuditService struct {
	// Read returns every event of the intent (and of the same request
	// under other intents) and the execution asked about.
	Read func(ctx context.Context, executionID, fingerprint string) (string, []audit.Stored, error)
	// Quarantine lists the messages the views refused (nil: none kept).
	Quarantine Quarantine
}

var _ portcullisv1connect.AuditServiceHandler = (*AuditService)(nil)

// Investigate answers the five questions of an incident.
func (s *AuditService) Investigate(ctx context.Context, req *connect.Request[pb.InvestigateRequest]) (*connect.Response[pb.InvestigateResponse], error) {
	m := req.Msg
	if (m.GetExecutionId() == "") == (m.GetFingerprint() == "") {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("give execution_id or fingerprint"))
	}
	id, events, err := s.Read(ctx, m.GetExecutionId(), m.GetFingerprint())
	if err != nil {
		return nil, connectError(err)
	}
	inv := audit.Investigate(id, events)
	out := &pb.InvestigateResponse{ExecutionId: inv.ExecutionID, RelatedExecutions: inv.Related}
	for _, a := range inv.Answers {
		out.Answers = append(out.Answers, &pb.InvestigationAnswer{Question: a.Question, Answer: a.Answer, Evidence: a.Evidence})
	}
	for _, st := range inv.Timeline {
		out.Timeline = append(out.Timeline, &pb.TimelineStep{Time: timestamppb.New(st.Time), StreamSeq: st.Seq, ExecutionId: st.Execution,
			Event: st.Event, GatewayId: st.Gateway, SessionId: st.Session, JsonrpcId: st.Request, Caller: st.Caller, Detail: st.Detail})
	}
	if len(out.Answers) != 5 {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("investigation gave %d answers", len(out.Answers)))
	}
	return connect.NewResponse(out), nil
}
