package ledger

import (
	"context"
	"crypto/ed25519"
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
	catchUpWaitMax     = 10 * time.Second
)

// Config wires a Service.
type Config struct {
	Log       Log
	Views     Views
	Key       fingerprint.Key
	Contracts contract.Book
	GatewayID string
	Now       func() time.Time // nil: time.Now
	// Budget holds, settles and releases budget-bound executions' holds
	// (nil: budget-bound tools are refused).
	Budget Budget
	// SignKey signs every event this gateway writes (nil: unsigned).
	SignKey ed25519.PrivateKey
	// OnBegin, when set, hears every Begin's answer (metrics): the
	// decision, whether an error is a refusal by the rules, and the error.
	// It must not block.
	OnBegin func(decision pb.Decision, refused bool, err error)
	// Lanes, when more than one, are the ledger's execution lanes (lane k
	// at index k; see Lanes): Log and Views.WaitFor are then unused and
	// every decision goes to the lane its intent lives in. Empty: one lane,
	// Log.
	Lanes []Lane
}

// Service decides: it reads what it knows (its own recent writes, else the
// views), applies the pure rules, and appends with compare-and-set on the
// subject that owns the decision. A conflict means another writer moved
// first: it waits for the views to reach the sequence the log reported and
// decides again. It is safe for concurrent use and for many Services
// (gateways) sharing one Log.
type Service struct {
	log       Log
	views     Views
	key       fingerprint.Key
	contracts contract.Book
	gatewayID string
	now       func() time.Time
	known     *knownCache
	budget    Budget
	signKey   ed25519.PrivateKey
	onBegin   func(pb.Decision, bool, error)
	lanes     Lanes
	laneSet   laneLog // nil: one lane (log, views.WaitFor)
}

// NewService returns a Service over cfg.
func NewService(cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s := &Service{
		log: cfg.Log, views: cfg.Views, key: cfg.Key, contracts: cfg.Contracts,
		gatewayID: cfg.GatewayID, now: now, known: newKnownCache(knownCacheSize), budget: cfg.Budget, signKey: cfg.SignKey, onBegin: cfg.OnBegin,
	}
	if len(cfg.Lanes) > 1 {
		s.laneSet = laneLog(cfg.Lanes)
		s.log, s.lanes = s.laneSet, Lanes(len(cfg.Lanes))
	}
	return s
}

// BeginInput is one tools/call as the ledger sees it.
type BeginInput struct {
	Action       fingerprint.Action
	OperationKey string
	Correlation  *pb.Correlation
	// DispatchToken, when set, asks for a new execution that needs no
	// approval and holds no budget to be accepted and dispatched in one
	// event (ACCEPTED_DISPATCHED, see AcceptType): the caller that gets it
	// back in DISPATCHED under this token has won the dispatch. An attach,
	// or a tool that needs approval or a budget hold, is decided as
	// without it.
	DispatchToken string
	// DecidedAgain: the same call asks again because what it waited for
	// changed (the dispatch driver's decideAgain: absence proven, an
	// unknown outcome met while waiting). An attach is recorded (its
	// compare-and-set decides the recovery) but is not another retry, so
	// attach_count does not move.
	DecidedAgain bool
}

// BeginResult is Begin's decision.
type BeginResult struct {
	Decision  pb.Decision
	Execution *pb.Execution
	Recovery  pb.Recovery
	Reason    string
}

// Now is the ledger's clock (the one its dispatch deadlines and match
// windows are measured by).
func (s *Service) Now() time.Time { return s.now() }

// Begin accepts a new execution or attaches the call to the latest
// execution of the same intent (operation key, else fingerprint). The
// intent's subject filter owns the decision to create; the execution's
// subject owns the decision to attach (its state picks the recovery).
func (s *Service) Begin(ctx context.Context, in BeginInput) (BeginResult, error) {
	res, err := s.begin(ctx, in)
	if s.onBegin != nil {
		s.onBegin(res.Decision, Refused(err), err)
	}
	return res, err
}

// Refused reports whether err is the rules saying no (bad input, no
// contract, a reused operation key, a denied budget) rather than a
// failure to decide.
func Refused(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrNoContract) || errors.Is(err, ErrKeyReuse) || errors.Is(err, ErrBudgetDenied)
}

func (s *Service) begin(ctx context.Context, in BeginInput) (BeginResult, error) {
	if err := validateBegin(in); err != nil {
		return BeginResult{}, err
	}
	c, ok := s.contracts.Lookup(in.Action.Tool)
	if !ok {
		return BeginResult{}, fmt.Errorf("%w: %q (a side-effecting tool needs a written contract in the config)", ErrNoContract, in.Action.Tool)
	}
	if c.Retry == contract.ReadOnly && in.OperationKey != "" {
		return BeginResult{}, fmt.Errorf("%w: %s", ErrInvalid, ReadOnlyKeyRefusal(in.Action.Tool))
	}
	d, err := fingerprint.Compute(s.key, c.Fingerprint, in.Action)
	if err != nil {
		return BeginResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Budget != nil && s.budget == nil {
		return BeginResult{}, fmt.Errorf("%w: tool %q is bound to a budget but this gateway has none", ErrInvalid, in.Action.Tool)
	}
	if c.Budget != nil {
		if _, _, _, err := resolveBinding(c.Budget, in.Action.Arguments); err != nil {
			return BeginResult{}, err
		}
	}
	if c.Retry == contract.ReadOnly {
		res, err := s.create(ctx, c, in, d, ReadOnlyToken, IntentHead{}, "")
		return res, err
	}
	token := s.intentToken(in, d)
	for round := 0; round < maxDecisionRounds; round++ {
		intent, err := s.intent(ctx, token)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return BeginResult{}, err
		}
		prior, viaKey := intent.Latest, false
		m := MatchPrior(MatchInput{
			Contract: c, ByOperationKey: in.OperationKey != "", RequestDigest: d.RequestDigest,
			Prior: prior.Event.GetExecutionChanged().GetExecution(), Now: s.now(),
		})
		if in.OperationKey == "" {
			// No key: an execution with this fingerprint may also have been
			// begun with one (docs/matching.md).
			keyed, err := s.keyedPrior(ctx, d.Fingerprint)
			if err != nil {
				return BeginResult{}, err
			}
			if keyed.Event != nil {
				km := MatchPrior(MatchInput{Contract: c, RequestDigest: d.RequestDigest, Prior: keyed.Event.GetExecutionChanged().GetExecution(), Now: s.now()})
				if km.Kind != MatchNew && (m.Kind == MatchNew || keyed.Event.GetExecutionId() > prior.Event.GetExecutionId()) {
					prior, viaKey, m = keyed, true, km
				}
			}
		}
		var res BeginResult
		switch m.Kind {
		case MatchRefuse:
			return BeginResult{}, fmt.Errorf("%w: %s", ErrKeyReuse, m.Reason)
		case MatchAttach:
			if viaKey {
				m.Reason = "matched by fingerprint to an execution begun with an operation key: " + m.Reason
			}
			res, err = s.attach(ctx, prior, in.Correlation, in.DecidedAgain, m)
		case MatchExpire:
			// Recorded once across gateways; whoever wins, the next round
			// sees the prior out of DISPATCHED and gives the class recovery.
			if _, _, err := s.ExpireOverdue(ctx, prior.Event.GetExecutionId()); err != nil {
				return BeginResult{}, err
			}
			continue
		default:
			res, err = s.create(ctx, c, in, d, token, intent, s.lanes.IntentFilter(token))
		}
		if errors.Is(err, ErrConflict) {
			if err := s.catchUp(ctx, err); err != nil {
				return BeginResult{}, err
			}
			continue
		}
		if err == nil && res.Decision == pb.Decision_DECISION_NEW && c.Budget != nil {
			return s.hold(ctx, res)
		}
		return res, err
	}
	return BeginResult{}, ErrContended
}

// keyedPrior is the latest execution begun with an operation key whose
// fingerprint is fp (a zero Head when none). A keyless Begin attaches to
// it when it can absorb the retry and the keyless intent's own latest
// execution cannot, or is older: of the executions with this fingerprint
// that can absorb a retry, the latest does, and a new execution starts only
// when none can. Like every view read it is a hint; the attach's
// compare-and-set on the execution decides.
func (s *Service) keyedPrior(ctx context.Context, fp string) (Head, error) {
	subject, ok := s.known.keyedSubject(fp)
	if !ok {
		var err error
		subject, err = s.views.KeyedByFingerprint(ctx, fp)
		if errors.Is(err, ErrNotFound) {
			return Head{}, nil
		}
		if err != nil {
			return Head{}, err
		}
	}
	h, err := s.head(ctx, subject)
	if errors.Is(err, ErrNotFound) {
		return Head{}, nil
	}
	if err != nil {
		return Head{}, err
	}
	return h, nil
}

// hold takes a new budget-bound execution's hold. The execution is
// appended first, so racing Begins never reserve for an execution that
// loses; a crash between the two leaves an ACCEPTED execution without a
// hold, which MarkDispatched repairs (it takes the same, idempotent hold
// before anything is dispatched). A denied hold denies the execution.
func (s *Service) hold(ctx context.Context, res BeginResult) (BeginResult, error) {
	x := res.Execution
	allowed, why, err := s.budget.Hold(ctx, holdOf(x))
	if err == nil && allowed {
		return res, nil
	}
	reason := why
	if err != nil {
		reason = err.Error()
	}
	denied, terr := s.Transition(ctx, Change{
		ExecutionID: x.GetExecutionId(), Event: pb.EventType_EVENT_TYPE_DENIED, Evidence: "budget",
		Apply: func(x *pb.Execution) {
			x.Reason = "budget " + x.GetBudgetAccount() + ": " + reason
			x.BudgetOutcome = BudgetDenied
			x.AuthorizedBy = "budget"
		},
	})
	if terr != nil {
		return BeginResult{}, terr
	}
	res.Execution = denied
	res.Reason = denied.GetReason()
	return res, nil
}

// create appends a new execution's ACCEPTED event, under compare-and-set on
// the intent's subject filter (nothing else may have happened to the intent
// since it was read). One message is the whole decision. Read-only tools
// are appended without a condition on their intent.
func (s *Service) create(ctx context.Context, c contract.Contract, in BeginInput, d fingerprint.Digests, token string, intent IntentHead, check string) (BeginResult, error) {
	now := s.now()
	id := newExecutionID(intent.Latest.Event.GetExecutionId())
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
		Correlation: in.Correlation, GatewayId: s.gatewayID, MatchWindow: c.MatchWindow.String(), IntentToken: token,
	}
	if c.Budget != nil {
		acct, amount, cur, err := resolveBinding(c.Budget, in.Action.Arguments)
		if err != nil {
			return BeginResult{}, err
		}
		x.BudgetAccount, x.BudgetAmount, x.BudgetCurrency = acct, amount, cur
		x.BudgetOperationKey = in.OperationKey
		if x.BudgetOperationKey == "" {
			x.BudgetOperationKey = id
		}
	}
	ev := s.event(s.acceptType(c, in, x, now), s.lanes.ExecutionSubject(token, id), id, now)
	ev.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Correlation: in.Correlation}}
	data := s.seal(ev, nil)
	m := Message{Subject: ev.Subject, CheckSubject: check, ExpectedSeq: intent.Seq, Event: ev, Data: data}
	if check == "" {
		m.ExpectedSeq = 0 // a read_only execution's own, new subject
	}
	seq, err := s.append(ctx, Head{}, m)
	if err != nil {
		return BeginResult{}, err
	}
	if check != "" {
		s.known.putCreated(token, Head{Seq: seq, Event: ev})
	}
	if in.OperationKey != "" && check != "" {
		s.known.putKeyed(d.Fingerprint, ev.Subject)
	}
	return BeginResult{Decision: pb.Decision_DECISION_NEW, Execution: withSeq(x, seq)}, nil
}

// newExecutionID makes an id that sorts after the intent's previous
// execution even when this gateway's clock is behind the one that created
// it, so "latest execution of an intent" is also the greatest id.
func newExecutionID(prev string) string {
	id := ulid.Make()
	if len(prev) == 30 {
		if p, err := ulid.ParseStrict(prev[4:]); err == nil && id.Compare(p) <= 0 {
			id = p
			for i := len(id) - 1; i >= 6; i-- { // bump the entropy, keep the time
				id[i]++
				if id[i] != 0 {
					break
				}
			}
		}
	}
	return "act_" + id.String()
}

// attach records the retry's correlation on the prior execution, under CAS
// on the execution's subject, so the recovery returned follows from the
// state the retry was attached in. again: the same call decided again,
// not another retry (attach_count counts retries).
func (s *Service) attach(ctx context.Context, prior Head, corr *pb.Correlation, again bool, m Match) (BeginResult, error) {
	x := cloneExecution(prior.Event)
	now := s.now()
	if !again {
		x.AttachCount++
	}
	x.UpdatedAt = timestamppb.New(now)
	ev := s.event(pb.EventType_EVENT_TYPE_ATTACHED, prior.Event.GetSubject(), x.GetExecutionId(), now)
	ev.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Correlation: corr}}
	data := s.seal(ev, prior.Event.GetHash())
	seq, err := s.append(ctx, prior, Message{Subject: ev.Subject, ExpectedSeq: prior.Seq, Event: ev, Data: data})
	if err != nil {
		return BeginResult{}, err
	}
	return BeginResult{Decision: pb.Decision_DECISION_ATTACHED, Execution: withSeq(x, seq), Recovery: m.Recovery, Reason: m.Reason}, nil
}

// Change describes one lifecycle transition requested by a caller.
type Change struct {
	ExecutionID string
	Event       pb.EventType
	// Apply fills the event-specific fields of the next record (result,
	// reason, approver). It must not change the state.
	Apply    func(x *pb.Execution)
	Evidence string
	// DispatchToken is the caller's token of a DISPATCHED transition. When
	// the execution is already DISPATCHED under the same token, Transition
	// returns it as it is (the caller won before and lost the answer).
	DispatchToken string
	// Require, when set, checks the current record before the transition
	// (and again after every lost compare-and-set); its error refuses it.
	Require func(x *pb.Execution, now time.Time) error
}

// Transition appends one lifecycle event with CAS on the execution's
// subject. When another caller moved first, it catches up and checks the
// transition again, so the loser of a contested transition gets an
// *IllegalTransitionError naming the winner's state.
func (s *Service) Transition(ctx context.Context, ch Change) (*pb.Execution, error) {
	if len(ch.DispatchToken) > MaxFieldBytes || !utf8.ValidString(ch.DispatchToken) {
		return nil, fmt.Errorf("%w: dispatch_token must be valid UTF-8 of at most %d bytes", ErrInvalid, MaxFieldBytes)
	}
	subj, err := s.executionSubject(ctx, ch.ExecutionID)
	if err != nil {
		return nil, err
	}
	for round := 0; round < maxDecisionRounds; round++ {
		h, err := s.head(ctx, subj)
		if err != nil {
			return nil, err
		}
		x := cloneExecution(h.Event)
		if ch.Event == pb.EventType_EVENT_TYPE_DISPATCHED && ch.DispatchToken != "" &&
			x.GetState() == pb.State_STATE_DISPATCHED && x.GetDispatchToken() == ch.DispatchToken {
			// Answer as the winner was only if the log itself still says
			// so (a view may lag a later transition).
			if h, err = s.log.Last(ctx, subj); err != nil {
				return nil, err
			}
			s.known.putHead(h)
			if x = cloneExecution(h.Event); x.GetState() == pb.State_STATE_DISPATCHED && x.GetDispatchToken() == ch.DispatchToken {
				return withSeq(x, h.Seq), nil
			}
		}
		if ch.Require != nil {
			if err := ch.Require(x, s.now()); err != nil {
				return nil, err
			}
		}
		to, err := Transition(x.GetState(), ch.Event, classOf(x.GetRetryClass()))
		if err != nil {
			var ite *IllegalTransitionError
			if errors.As(err, &ite) {
				ite.ExecutionID = ch.ExecutionID
			}
			return nil, err
		}
		now := s.now()
		if err := s.checkDeadline(x, ch.Event, now); err != nil {
			return nil, err
		}
		stamp(x, ch.Event, now)
		if ch.Event == pb.EventType_EVENT_TYPE_DISPATCHED {
			s.setDispatch(x, ch.DispatchToken, now)
		}
		if ch.Apply != nil {
			ch.Apply(x)
		}
		x.State = to
		x.UpdatedAt = timestamppb.New(now)
		if err := checkResultStatus(x, ch.Event); err != nil {
			return nil, err
		}
		if err := s.budgetEffect(ctx, x, ch.Event, ch.Evidence); err != nil {
			return nil, err
		}
		ev := s.event(ch.Event, subj, ch.ExecutionID, now)
		ev.Body = &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x, Evidence: ch.Evidence}}
		data := s.seal(ev, h.Event.GetHash())
		seq, err := s.append(ctx, h, Message{Subject: subj, ExpectedSeq: h.Seq, Event: ev, Data: data})
		if errors.Is(err, ErrConflict) {
			if err := s.catchUp(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return withSeq(x, seq), nil
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

// Get reads an execution's latest event from the log itself, so a read
// after any gateway's write sees it.
func (s *Service) Get(ctx context.Context, executionID string) (*pb.Execution, error) {
	subj, err := s.executionSubject(ctx, executionID)
	if err != nil {
		return nil, err
	}
	h, err := s.log.Last(ctx, subj)
	if errors.Is(err, ErrNotFound) {
		// The subject came from this gateway's own write or the views, so
		// the execution exists: on a replicated stream a direct get is
		// answered by any replica, and one that has not caught up knows
		// nothing of it yet (GetExecution answered 404, and the role check
		// of MarkDispatched permission_denied, right after another
		// gateway's Begin on a cluster). Its freshest head here answers.
		h, err = s.head(ctx, subj)
	}
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, executionID)
	}
	if err != nil {
		return nil, err
	}
	// The log checked the head's signature; only the views, which fold the
	// subject's chain from its start, know whether it links to the last
	// valid event: a genuine old event replayed at the end of its subject
	// passes every check of its own. So the views have the last word once
	// they hold this sequence (waited for, bounded): another event there
	// means the log's latest message was quarantined.
	v, err := s.views.Head(ctx, subj)
	if err != nil || v.Seq < h.Seq {
		wctx, cancel := context.WithTimeout(ctx, viewsWaitMax)
		if s.waitFor(wctx, subj, h.Seq) == nil {
			v, err = s.views.Head(ctx, subj)
		}
		cancel()
	}
	if err == nil && v.Seq >= h.Seq && v.Event.GetEventId() != h.Event.GetEventId() {
		h = v
	}
	s.known.putHead(h)
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

// executionSubject finds an execution's subject: from this gateway's own
// writes, the views, or, when neither knows the id yet (another gateway
// just created it), after the views caught up with the stream.
func (s *Service) executionSubject(ctx context.Context, id string) (string, error) {
	if err := ValidateExecutionID(id); err != nil {
		return "", err
	}
	if subj, ok := s.known.subject(id); ok {
		return subj, nil
	}
	subj, err := s.views.ExecutionSubject(ctx, id)
	if errors.Is(err, ErrNotFound) {
		if err := s.catchUp(ctx, nil); err != nil {
			return "", err
		}
		subj, err = s.views.ExecutionSubject(ctx, id)
	}
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w: execution %s", ErrNotFound, id)
	}
	return subj, err
}

// head is the newer of this gateway's own latest write on subject and the
// views' head.
func (s *Service) head(ctx context.Context, subject string) (Head, error) {
	own, ok := s.known.head(subject)
	v, err := s.views.Head(ctx, subject)
	switch {
	case err == nil && v.Seq > own.Seq:
		return v, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return Head{}, err
	case ok:
		return own, nil
	case err == nil:
		return v, nil
	}
	return Head{}, ErrNotFound
}

// intent is the newer of what this gateway created for the intent and what
// the views hold, with its latest execution's freshest head.
func (s *Service) intent(ctx context.Context, token string) (IntentHead, error) {
	own, ok := s.known.intent(token)
	v, err := s.views.Intent(ctx, token)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return IntentHead{}, err
	}
	if err == nil && v.Seq >= own.seq {
		ok = false
	} else if !ok {
		return IntentHead{}, ErrNotFound
	}
	subject := v.Latest.Event.GetSubject()
	seq := v.Seq
	if ok {
		subject, seq = own.subject, own.seq
	}
	if subject == "" {
		return IntentHead{Seq: seq}, nil // only quarantined messages: no execution yet
	}
	h, err := s.head(ctx, subject)
	if err != nil {
		return IntentHead{}, err
	}
	return IntentHead{Seq: max(seq, h.Seq), Latest: h}, nil
}

// catchUp waits until the views hold the sequence a conflict reported (or,
// when unknown, the stream's last sequence now), so the next round decides
// on what the winner wrote.
func (s *Service) catchUp(ctx context.Context, conflict error) error {
	if s.laneSet == nil {
		return CatchUp(ctx, s.log, s.views.WaitFor, conflict)
	}
	// Sequences are per lane: catch up the lane the conflict names, or,
	// when it names none, every lane.
	var ce *ConflictError
	if errors.As(conflict, &ce) {
		if l, ok := s.laneOf(ce.Subject); ok {
			return CatchUp(ctx, l.Log, l.WaitFor, conflict)
		}
	}
	for _, l := range s.laneSet {
		if err := CatchUp(ctx, l.Log, l.WaitFor, nil); err != nil {
			return err
		}
	}
	return nil
}

// viewsWaitMax bounds how long a read from the log waits for the views to
// check its chain; past it the log's head is served as it is.
const viewsWaitMax = 2 * time.Second

// waitFor waits until the views of subject's lane hold seq.
func (s *Service) waitFor(ctx context.Context, subject string, seq uint64) error {
	if s.laneSet == nil {
		return s.views.WaitFor(ctx, seq)
	}
	l, ok := s.laneOf(subject)
	if !ok {
		return fmt.Errorf("%w: subject %s is in no lane", ErrInvalid, subject)
	}
	return l.WaitFor(ctx, seq)
}

// laneOf is the lane a subject lives in, on a sharded ledger.
func (s *Service) laneOf(subject string) (Lane, bool) {
	k, _, ok := SubjectLane(subject)
	if !ok || k >= len(s.laneSet) {
		return Lane{}, false
	}
	return s.laneSet[k], true
}

// CatchUp is how every decider recovers from a lost compare-and-set: wait
// (bounded) until the views hold the sequence the conflict named, or the
// stream's last sequence when it named none.
func CatchUp(ctx context.Context, log Log, waitFor func(context.Context, uint64) error, conflict error) error {
	var seq uint64
	var ce *ConflictError
	if errors.As(conflict, &ce) {
		seq = ce.ActualSeq
	}
	if seq == 0 {
		var err error
		if seq, err = log.LastSeq(ctx); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, catchUpWaitMax)
	defer cancel()
	if err := waitFor(wctx, seq); err != nil {
		return fmt.Errorf("catch up to sequence %d: %w", seq, err)
	}
	return nil
}

// append checks the message against the head it follows (the same check
// the projector makes when it folds; the event was sealed just before, so
// its hash is not computed again) and appends it. The landed event
// becomes this gateway's known head, so it reads its own writes without a
// round trip.
func (s *Service) append(ctx context.Context, prev Head, m Message) (uint64, error) {
	if err := CheckFollows(prev.Event, m.Event); err != nil {
		panic(fmt.Sprintf("ledger: refusing to append an invalid event: %v", err))
	}
	seqs, err := s.log.Append(ctx, m)
	if errors.Is(err, ErrAppendUnknown) {
		seqs, err = s.landed(ctx, m, err)
	}
	if err != nil {
		return 0, err
	}
	s.known.putHead(Head{Seq: seqs[0], Event: m.Event})
	return seqs[0], nil
}

// landed settles an append whose answer never came: if the event is the
// head of its subject, it landed. Otherwise the original error stands and
// the caller decides again.
func (s *Service) landed(ctx context.Context, m Message, appendErr error) ([]uint64, error) {
	h, err := s.log.Last(ctx, m.Subject)
	if err != nil || h.Event.GetEventId() != m.Event.GetEventId() {
		return nil, appendErr
	}
	return []uint64{h.Seq}, nil
}

// seal seals ev after prevHash and signs it with the Service's own key,
// if it has one (else the log's committer signs its group). It returns
// the event's encoding for Message.Data, or nil when the Service signs
// (the signature is not in the sealed encoding: the log marshals ev).
func (s *Service) seal(ev *pb.Event, prevHash []byte) []byte {
	if s.signKey != nil {
		Seal(ev, prevHash)
		Sign(ev, s.signKey)
		return nil
	}
	return SealEncoded(ev, prevHash)
}

func (s *Service) event(t pb.EventType, subject, executionID string, now time.Time) *pb.Event {
	return &pb.Event{
		EventId: "evt_" + ulid.Make().String(), Type: t, Subject: subject, ExecutionId: executionID,
		TimeUnixNano: now.UnixNano(), GatewayId: s.gatewayID,
	}
}

// intentToken names the intent: a keyed digest of (actor, operation key)
// when the caller gave a key, else the fingerprint. Neither leaks the key
// or the action into subject names.
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
	fields := [...]struct{ name, v string }{
		{"action.actor", a.Actor}, {"action.tool", a.Tool}, {"action.channel", a.Channel}, {"action.target", a.Target},
		{"action.credential_ref", a.CredentialRef}, {"action.method", a.Method}, {"action.intent_scope", a.IntentScope},
		{"operation_key", in.OperationKey}, {"correlation.jsonrpc_id", in.Correlation.GetJsonrpcId()}, {"dispatch_token", in.DispatchToken},
		{"correlation.session_id", in.Correlation.GetSessionId()},
	}
	for _, f := range fields {
		if len(f.v) > MaxFieldBytes {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, f.name, MaxFieldBytes)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, f.name)
		}
	}
	return nil
}
