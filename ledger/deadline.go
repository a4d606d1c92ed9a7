package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Dispatch deadlines (docs/design.md §2: a dispatch has a deadline).
const (
	// DispatchGrace is added to the tool's timeout to make a dispatch's
	// deadline: time for the executor that timed out to find out what
	// happened and record it (the SSH executor asks the remote marker for
	// up to 10 s after a dropped connection), and for clock skew between
	// gateways.
	DispatchGrace = 15 * time.Second
	// MaxSweep bounds the overdue executions one SweepOverdue expires; the
	// next sweep takes the rest.
	MaxSweep = 256
	// EvidenceDeadlinePassed is the evidence of an OUTCOME_UNKNOWN recorded
	// because a dispatch's deadline passed with no result.
	EvidenceDeadlinePassed = "dispatch deadline passed"
)

// ErrDeadlineAhead: a transition that needs the dispatch deadline to have
// passed came before it (absence at the target is not proven while the
// target may still be working on the request).
var ErrDeadlineAhead = errors.New("dispatch deadline not passed")

// errNotOverdue stops an expiry whose execution is no longer overdue.
var errNotOverdue = errors.New("not overdue")

// DispatchDeadline is when a DISPATCHED execution stops being "in flight":
// the deadline its DISPATCHED event recorded, else (an execution recorded
// before deadlines were) its first dispatch time + the contract's timeout +
// DispatchGrace.
func DispatchDeadline(x *pb.Execution, c contract.Contract) time.Time {
	if x.GetDispatchDeadline() != nil {
		return x.GetDispatchDeadline().AsTime()
	}
	return x.GetDispatchedAt().AsTime().Add(c.DispatchTimeout() + DispatchGrace)
}

func formatDeadline(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// contractOf is the contract of an execution's tool (the zero contract,
// with the default timeout, when the config no longer has it).
func (s *Service) contractOf(x *pb.Execution) contract.Contract {
	c, _ := s.contracts.Lookup(x.GetTool())
	return c
}

// checkDeadline refuses a transition the dispatch deadline does not allow
// yet: a resolution to NOT_EXECUTED before it.
func (s *Service) checkDeadline(x *pb.Execution, t pb.EventType, now time.Time) error {
	if t != pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED || x.GetDispatchedAt() == nil {
		return nil
	}
	if d := DispatchDeadline(x, s.contractOf(x)); now.Before(d) {
		return fmt.Errorf("%w: %s was dispatched with deadline %s; until then a status query's \"not found\" does not prove absence (the target may still be working on it)",
			ErrDeadlineAhead, x.GetExecutionId(), formatDeadline(d))
	}
	return nil
}

// setDispatch records a DISPATCHED transition's token and deadline.
func (s *Service) setDispatch(x *pb.Execution, token string, now time.Time) {
	x.DispatchToken = token
	x.DispatchDeadline = timestamppb.New(now.Add(s.contractOf(x).DispatchTimeout() + DispatchGrace))
}

// acceptType is the type of a new execution's first event, and stamps x
// for it. A Begin that carries a dispatch token, for a tool that needs no
// approval (x is ACCEPTED) and holds no budget, is accepted and dispatched
// in one event: x is stamped exactly as a DISPATCHED transition stamps it
// (first dispatch time and count, the token, the dispatch deadline) and
// enters DISPATCHED. A budget-bound tool keeps ACCEPTED then DISPATCHED:
// its hold is taken between the two.
func (s *Service) acceptType(c contract.Contract, in BeginInput, x *pb.Execution, now time.Time) pb.EventType {
	if in.DispatchToken == "" || x.GetState() != pb.State_STATE_ACCEPTED || c.Budget != nil {
		return pb.EventType_EVENT_TYPE_ACCEPTED
	}
	stamp(x, pb.EventType_EVENT_TYPE_DISPATCHED, now)
	s.setDispatch(x, in.DispatchToken, now)
	x.State = pb.State_STATE_DISPATCHED
	return pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED
}

// ExpireOverdue records OUTCOME_UNKNOWN on a DISPATCHED execution whose
// dispatch deadline passed with no result (evidence "dispatch deadline
// passed"). It is a compare-and-set on the execution's subject, so across
// gateways it lands once; expired says whether this call appended it. An
// execution that is not overdue (not DISPATCHED any more, or before its
// deadline) is returned as it is, without error: losing to another
// gateway, or to a result, is not a failure.
func (s *Service) ExpireOverdue(ctx context.Context, executionID string) (x *pb.Execution, expired bool, err error) {
	var deadline time.Time
	x, err = s.Transition(ctx, Change{
		ExecutionID: executionID, Event: pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, Evidence: EvidenceDeadlinePassed,
		Require: func(x *pb.Execution, now time.Time) error {
			deadline = DispatchDeadline(x, s.contractOf(x))
			if x.GetState() != pb.State_STATE_DISPATCHED || now.Before(deadline) {
				return errNotOverdue
			}
			return nil
		},
		Apply: func(x *pb.Execution) {
			x.Reason = "no result was recorded by the dispatch deadline " + formatDeadline(deadline) + "; the gateway that dispatched it may have died"
		},
	})
	if errors.Is(err, errNotOverdue) {
		x, err = s.Get(ctx, executionID)
		return x, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return x, true, nil
}

// SweepOverdue finds DISPATCHED executions past their dispatch deadline
// through the views and expires each (at most MaxSweep a call). n counts
// the expiries this call appended; executions another gateway expired
// first are not errors. Every gateway runs it periodically, so a dispatch
// whose gateway died is never "in flight" forever.
func (s *Service) SweepOverdue(ctx context.Context) (n int, err error) {
	ids, err := s.views.Overdue(ctx, s.now(), MaxSweep)
	if err != nil {
		return 0, fmt.Errorf("sweep overdue: %w", err)
	}
	var errs []error
	for _, id := range ids {
		_, expired, err := s.ExpireOverdue(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("expire %s: %w", id, err))
			continue
		}
		if expired {
			n++
		}
	}
	return n, errors.Join(errs...)
}
