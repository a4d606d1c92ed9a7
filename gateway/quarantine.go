package gateway

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxQuarantinePage bounds one ListQuarantine page.
const maxQuarantinePage = 1000

// Quarantine is the read side of a gateway's quarantine view.
type Quarantine interface {
	// ListQuarantined returns up to limit entries after the sequence of
	// afterStream ("": the executions stream), in (stream, sequence) order.
	ListQuarantined(ctx context.Context, afterStream string, afterSeq uint64, limit int) ([]*pb.Quarantined, error)
	// QuarantinedTotal is how many messages the views quarantined.
	QuarantinedTotal() uint64
}

// ListQuarantine lists what this gateway's projectors refused to fold.
func (s *AuditService) ListQuarantine(ctx context.Context, req *connect.Request[pb.ListQuarantineRequest]) (*connect.Response[pb.ListQuarantineResponse], error) {
	if s.Quarantine == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this gateway keeps no quarantine view"))
	}
	n := int(req.Msg.GetPageSize())
	if n < 0 || n > maxQuarantinePage {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("page_size must be between 0 and 1000"))
	}
	if n == 0 {
		n = 100
	}
	q, err := s.Quarantine.ListQuarantined(ctx, req.Msg.GetAfterStream(), req.Msg.GetAfterSeq(), n)
	if err != nil {
		return nil, connectError(err)
	}
	for _, e := range q {
		if e.GetQuarantinedAt() == nil && e.GetTimeUnixNano() != 0 { // a row written before quarantined_at
			e.QuarantinedAt = timestamppb.New(time.Unix(0, e.GetTimeUnixNano()))
		}
	}
	return connect.NewResponse(&pb.ListQuarantineResponse{Quarantined: q, Total: s.Quarantine.QuarantinedTotal()}), nil
}
