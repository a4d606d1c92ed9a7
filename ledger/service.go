package ledger

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Limits on what a caller may send, stated once.
const (
	MaxFieldBytes      = 512       // actor, tool, target, operation key, correlation fields, reasons
	MaxResultBodyBytes = 256 << 10 // stored result body
	maxDecisionRounds  = 512       // conflicts one decision may lose before giving up
)

// Config wires a Service.
type Config struct {
	Log       Log
	Views     Views
	Key       fingerprint.Key
	Contracts contract.Book
	GatewayID string
	Now       func() time.Time // nil: time.Now
}

// Service decides: it reads heads (own recent writes, then views, then the
// log on conflict), applies the pure rules, and appends with compare-and-set
// on the subject that owns the decision. It is safe for concurrent use and
// for many Services (gateways) sharing one Log.
type Service struct {
	log       Log
	views     Views
	key       fingerprint.Key
	contracts contract.Book
	gatewayID string
	now       func() time.Time
	heads     *headCache
}

// NewService returns a Service over cfg.
func NewService(cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Service{
		log: cfg.Log, views: cfg.Views, key: cfg.Key, contracts: cfg.Contracts,
		gatewayID: cfg.GatewayID, now: now, heads: newHeadCache(headCacheSize),
	}
}

// BeginInput is one tools/call as the ledger sees it.
type BeginInput struct {
	Action       fingerprint.Action
	OperationKey string
	Correlation  *pb.Correlation
}

// BeginResult is Begin's decision.
type BeginResult struct {
	Decision  pb.Decision
	Execution *pb.Execution
	Recovery  pb.Recovery
	Reason    string
}

// Begin accepts a new execution or attaches the call to the prior execution
// for the same intent (operation key, else fingerprint). The intent's
// subject owns the decision to create; the execution's subject owns the
// decision to attach (its state picks the recovery).
func (s *Service) Begin(ctx context.Context, in BeginInput) (BeginResult, error) {
	if err := validateBegin(in); err != nil {
		return BeginResult{}, err
	}
	c, ok := s.contracts.Lookup(in.Action.Tool)
	if !ok {
		return BeginResult{}, fmt.Errorf("%w: %q (a side-effecting tool needs a written contract in the config)", ErrNoContract, in.Action.Tool)
	}
	d, err := fingerprint.Compute(s.key, c.Fingerprint, in.Action)
	if err != nil {
		return BeginResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Retry == contract.ReadOnly {
		return s.create(ctx, c, in, d, "", Head{})
	}
	intentSubj := IntentSubject(s.intentToken(in, d))
	authoritative := false
	for round := 0; round < maxDecisionRounds; round++ {
		intent, err := s.head(ctx, intentSubj, authoritative)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return BeginResult{}, err
		}
		var prior Head
		if intent.Event != nil {
			prior, err = s.head(ctx, ExecutionSubject(intent.Event.GetExecutionId()), authoritative)
			if errors.Is(err, ErrNotFound) && !authoritative {
				authoritative = true // the view saw the claim but not yet the execution
				continue
			}
			if err != nil {
				return BeginResult{}, err
			}
		}
		m := MatchPrior(MatchInput{
			Contract: c, ByOperationKey: in.OperationKey != "", RequestDigest: d.RequestDigest,
			Prior: prior.Event.GetExecutionChanged().GetExecution(), Now: s.now(),
		})
		var res BeginResult
		switch m.Kind {
		case MatchRefuse:
			return BeginResult{}, fmt.Errorf("%w: %s", ErrKeyReuse, m.Reason)
		case MatchAttach:
			res, err = s.attach(ctx, prior, in.Correlation, m)
		default:
			res, err = s.create(ctx, c, in, d, intentSubj, intent)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrAppendUnknown) {
			authoritative = true
			continue
		}
		return res, err
	}
	return BeginResult{}, ErrContended
}

// create appends a new execution: the intent claim (CAS on the intent
// subject) and the ACCEPTED event (on the new execution's subject) as one
// atomic decision. Read-only tools append only the ACCEPTED event.
func (s *Service) create(ctx context.Context, c contract.Contract, in BeginInput, d fingerprint.Digests, intentSubj string, intent Head) (BeginResult, error) {
	now := s.now()
	id := "act_" + ulid.Make().String()
	state := pb.State_STATE_ACCEPTED
	if c.Approval == contract.ApprovalPerUse {
		state = pb.State_STATE_AWAITING_APPROVAL
	}
	a := in.Action
	x := &pb.Execution{
		ExecutionId: id, Fingerprint: d.Fingerprint, State: state, RequestDigest: d.RequestDigest,
		OperationKey: in.OperationKey, Actor: a.Actor, Tool: a.Tool, Channel: a.Channel, Target: a.Target,
		Method: a.Method, IntentScope: a.IntentScope, RetryClass: ClassProto(c.Retry),
		CanonicalRecord: string(d.Record), AcceptedAt: timestamppb.New(now), UpdatedAt: timestamppb.New(now),
		Correlation: in.Correlation, GatewayId: s.gatewayID, MatchWindow: c.MatchWindow.String(),
	}
	accepted := s.event(pb.EventType_EVENT_TYPE_ACCEPTED, ExecutionSubject(id), id, now)
	accepted.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Correlation: in.Correlation}}
	Seal(accepted, nil)
	msgs := []Message{{Subject: accepted.Subject, ExpectedSeq: 0, Event: accepted}}
	if intentSubj != "" {
		kind := "fingerprint"
		if in.OperationKey != "" {
			kind = "operation_key"
		}
		claim := s.event(pb.EventType_EVENT_TYPE_INTENT_CLAIMED, intentSubj, id, now)
		claim.Body = &pb.Event_IntentClaimed{IntentClaimed: &pb.IntentClaimed{
			KeyKind: kind, Fingerprint: d.Fingerprint, RequestDigest: d.RequestDigest,
			OperationKey: in.OperationKey, Actor: a.Actor,
		}}
		Seal(claim, intent.Event.GetHash())
		msgs = append([]Message{{Subject: intentSubj, ExpectedSeq: intent.Seq, Event: claim}}, msgs...)
	}
	seqs, err := s.append(ctx, msgs...)
	if err != nil {
		return BeginResult{}, err
	}
	out := withSeq(x, seqs[len(seqs)-1])
	return BeginResult{Decision: pb.Decision_DECISION_NEW, Execution: out}, nil
}

// attach records the retry's correlation on the prior execution, under CAS
// on the execution's subject, so the recovery returned follows from the
// state the retry was attached in.
func (s *Service) attach(ctx context.Context, prior Head, corr *pb.Correlation, m Match) (BeginResult, error) {
	x := cloneExecution(prior.Event)
	now := s.now()
	x.AttachCount++
	x.UpdatedAt = timestamppb.New(now)
	ev := s.event(pb.EventType_EVENT_TYPE_ATTACHED, prior.Event.GetSubject(), x.GetExecutionId(), now)
	ev.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Correlation: corr}}
	Seal(ev, prior.Event.GetHash())
	seqs, err := s.append(ctx, Message{Subject: ev.Subject, ExpectedSeq: prior.Seq, Event: ev})
	if err != nil {
		return BeginResult{}, err
	}
	return BeginResult{Decision: pb.Decision_DECISION_ATTACHED, Execution: withSeq(x, seqs[0]), Recovery: m.Recovery, Reason: m.Reason}, nil
}

// Change describes one lifecycle transition requested by a caller.
type Change struct {
	ExecutionID string
	Event       pb.EventType
	// Apply fills the event-specific fields of the next record (result,
	// reason, approver). It must not change the state.
	Apply    func(x *pb.Execution)
	Evidence string
}

// Transition appends one lifecycle event with CAS on the execution's
// subject. When another caller moved first, it catches up and checks the
// transition again, so the loser of a contested transition gets an
// *IllegalTransitionError naming the winner's state.
func (s *Service) Transition(ctx context.Context, ch Change) (*pb.Execution, error) {
	if err := ValidateExecutionID(ch.ExecutionID); err != nil {
		return nil, err
	}
	subj := ExecutionSubject(ch.ExecutionID)
	authoritative := false
	for round := 0; round < maxDecisionRounds; round++ {
		h, err := s.head(ctx, subj, authoritative)
		if errors.Is(err, ErrNotFound) && !authoritative {
			authoritative = true
			continue
		}
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: execution %s", ErrNotFound, ch.ExecutionID)
		}
		if err != nil {
			return nil, err
		}
		x := cloneExecution(h.Event)
		to, err := Transition(x.GetState(), ch.Event, classOf(x.GetRetryClass()))
		if err != nil {
			var ite *IllegalTransitionError
			if errors.As(err, &ite) {
				ite.ExecutionID = ch.ExecutionID
			}
			return nil, err
		}
		now := s.now()
		stamp(x, ch.Event, now)
		if ch.Apply != nil {
			ch.Apply(x)
		}
		x.State = to
		x.UpdatedAt = timestamppb.New(now)
		ev := s.event(ch.Event, subj, ch.ExecutionID, now)
		ev.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Evidence: ch.Evidence}}
		Seal(ev, h.Event.GetHash())
		seqs, err := s.append(ctx, Message{Subject: subj, ExpectedSeq: h.Seq, Event: ev})
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrAppendUnknown) {
			authoritative = true
			continue
		}
		if err != nil {
			return nil, err
		}
		return withSeq(x, seqs[0]), nil
	}
	return nil, ErrContended
}

// stamp sets the lifecycle timestamp an event type owns.
func stamp(x *pb.Execution, t pb.EventType, now time.Time) {
	ts := timestamppb.New(now)
	switch t {
	case pb.EventType_EVENT_TYPE_AUTHORIZED:
		x.AuthorizedAt = ts
	case pb.EventType_EVENT_TYPE_DISPATCHED:
		if x.DispatchedAt == nil {
			x.DispatchedAt = ts // first dispatch time; resends keep it
		}
		x.DispatchCount++
	case pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED:
		x.CompletedAt = ts
	case pb.EventType_EVENT_TYPE_DELIVERED:
		x.DeliveredAt = ts
	}
}

// Get reads an execution from the log itself, so a read after any gateway's
// write sees it.
func (s *Service) Get(ctx context.Context, executionID string) (*pb.Execution, error) {
	if err := ValidateExecutionID(executionID); err != nil {
		return nil, err
	}
	h, err := s.head(ctx, ExecutionSubject(executionID), true)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, executionID)
	}
	if err != nil {
		return nil, err
	}
	return withSeq(cloneExecution(h.Event), h.Seq), nil
}

// List pages through executions from the views, newest first.
func (s *Service) List(ctx context.Context, q ListQuery) ([]*pb.Execution, string, error) {
	if q.PageSize < 0 || q.PageSize > 1000 {
		return nil, "", fmt.Errorf("%w: page_size must be between 0 and 1000", ErrInvalid)
	}
	if q.PageSize == 0 {
		q.PageSize = 100
	}
	if q.PageToken != "" {
		if err := ValidateExecutionID(q.PageToken); err != nil {
			return nil, "", fmt.Errorf("%w: bad page_token", ErrInvalid)
		}
	}
	return s.views.ListExecutions(ctx, q)
}

// head returns the latest known event on subject: from the log when
// authoritative, else the newer of this gateway's own recent writes and the
// views.
func (s *Service) head(ctx context.Context, subject string, authoritative bool) (Head, error) {
	if authoritative {
		h, err := s.log.Last(ctx, subject)
		if err != nil {
			return Head{}, err
		}
		s.heads.put(subject, h)
		return h, nil
	}
	h, cached := s.heads.get(subject)
	v, err := s.views.Head(ctx, subject)
	switch {
	case err == nil && v.Seq > h.Seq:
		return v, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return Head{}, err
	case cached:
		return h, nil
	case err == nil:
		return v, nil
	}
	return Head{}, ErrNotFound
}

// append checks every message (the same check the projector makes when it
// folds) and appends them as one decision; landed events become this
// gateway's known heads, so it reads its own writes without a round trip.
func (s *Service) append(ctx context.Context, msgs ...Message) ([]uint64, error) {
	for _, m := range msgs {
		var prev *pb.Event
		if m.ExpectedSeq != 0 {
			if h, ok := s.heads.get(m.Subject); ok && h.Seq == m.ExpectedSeq {
				prev = h.Event
			} else if v, err := s.views.Head(ctx, m.Subject); err == nil && v.Seq == m.ExpectedSeq {
				prev = v.Event
			}
		}
		if prev != nil || m.ExpectedSeq == 0 {
			if err := CheckNext(prev, m.Event); err != nil {
				panic(fmt.Sprintf("ledger: refusing to append an invalid event: %v", err))
			}
		}
	}
	seqs, err := s.log.Append(ctx, msgs...)
	if errors.Is(err, ErrAppendUnknown) {
		seqs, err = s.landed(ctx, msgs, err)
	}
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		s.heads.put(m.Subject, Head{Seq: seqs[i], Event: m.Event})
	}
	return seqs, nil
}

// landed settles an append whose answer never came: a decision is atomic,
// so if its last message is the head of its subject, all of it landed.
// Otherwise the original error stands and the caller decides again from
// the log.
func (s *Service) landed(ctx context.Context, msgs []Message, appendErr error) ([]uint64, error) {
	last := msgs[len(msgs)-1]
	h, err := s.log.Last(ctx, last.Subject)
	if err != nil || h.Event.GetEventId() != last.Event.GetEventId() {
		return nil, appendErr
	}
	seqs := make([]uint64, len(msgs))
	for i := range msgs {
		seqs[i] = h.Seq - uint64(len(msgs)-1-i) // an atomic batch is contiguous
	}
	return seqs, nil
}

func (s *Service) event(t pb.EventType, subject, executionID string, now time.Time) *pb.Event {
	return &pb.Event{
		EventId: "evt_" + ulid.Make().String(), Type: t, Subject: subject, ExecutionId: executionID,
		TimeUnixNano: now.UnixNano(), GatewayId: s.gatewayID,
	}
}

// intentToken names the intent subject: a keyed digest of (actor, operation
// key) when the caller gave a key, else the fingerprint. Neither leaks the
// key or the action into subject names.
func (s *Service) intentToken(in BeginInput, d fingerprint.Digests) string {
	if in.OperationKey == "" {
		return "f" + d.Fingerprint[len("hmac-sha256:"):]
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("portcullis operation key v1\x00"))
	m.Write([]byte(in.Action.Actor))
	m.Write([]byte{0})
	m.Write([]byte(in.OperationKey))
	return "k" + hex.EncodeToString(m.Sum(nil))
}

func cloneExecution(ev *pb.Event) *pb.Execution {
	return proto.Clone(ev.GetExecutionChanged().GetExecution()).(*pb.Execution)
}

func withSeq(x *pb.Execution, seq uint64) *pb.Execution {
	x = proto.Clone(x).(*pb.Execution)
	x.StreamSeq = seq
	return x
}

// ValidateExecutionID refuses ids that are not "act_" + a ULID; they would
// otherwise reach subject names.
func ValidateExecutionID(id string) error {
	if len(id) != 30 || id[:4] != "act_" {
		return fmt.Errorf("%w: execution id %q is not act_<ULID>", ErrInvalid, id)
	}
	if _, err := ulid.ParseStrict(id[4:]); err != nil {
		return fmt.Errorf("%w: execution id %q is not act_<ULID>", ErrInvalid, id)
	}
	return nil
}

func validateBegin(in BeginInput) error {
	a := in.Action
	if a.Tool == "" {
		return fmt.Errorf("%w: action.tool is required", ErrInvalid)
	}
	if a.Actor == "" {
		return fmt.Errorf("%w: action.actor is required", ErrInvalid)
	}
	fields := map[string]string{
		"action.actor": a.Actor, "action.tool": a.Tool, "action.channel": a.Channel, "action.target": a.Target,
		"action.credential_ref": a.CredentialRef, "action.method": a.Method, "action.intent_scope": a.IntentScope,
		"operation_key": in.OperationKey, "correlation.jsonrpc_id": in.Correlation.GetJsonrpcId(),
		"correlation.session_id": in.Correlation.GetSessionId(),
	}
	for name, v := range fields {
		if len(v) > MaxFieldBytes {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, name, MaxFieldBytes)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, name)
		}
	}
	return nil
}
