package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// Leading an account. Every gateway may decide on every account (each
// decision is a compare-and-set append on the account's subject, so two
// gateways deciding at once can never over-commit a limit), but two
// gateways deciding on one hot account lose most of their rounds to each
// other. So the gateway that holds an account's lease decides its commands
// in groups (one append per group) and the others forward theirs to it.
// The lease only routes: it is never what keeps a decision correct, so a
// lease believed by two gateways at once, or by none, costs speed only.

// Lease says which gateway leads an account's decisions, and until when,
// signed by that gateway's enrolled key (sealed.go): a record no enrolled
// gateway signed counts as no lease.
type Lease struct {
	Gateway string    `json:"gateway"`
	Expires time.Time `json:"expires"`
	Sig     []byte    `json:"sig,omitempty"`
}

// Leases keeps account leases in the ledger.
type Leases interface {
	// Lease is the account's lease record and its revision (rev 0: none).
	Lease(ctx context.Context, account string) (l Lease, rev uint64, err error)
	// PutLease writes l if the account's record is still at rev (0: none
	// yet); a record moved on since is ledger.ErrConflict. It returns the
	// new revision.
	PutLease(ctx context.Context, account string, l Lease, rev uint64) (uint64, error)
}

// Forwarder carries a command to the gateway that leads its account, which
// answers it with ServeForward.
type Forwarder interface {
	// Forward sends req to gateway and returns its answer. ErrNoLeader:
	// nobody serves that gateway now, so the command was not delivered.
	Forward(ctx context.Context, gateway string, req []byte) ([]byte, error)
}

// ErrNoLeader: no gateway answers for the account's leader; the command
// was not delivered.
var ErrNoLeader = errors.New("the account's leading gateway does not answer")

// Lease timing. A gateway asks for an account's lease only once another
// gateway's write made one of its appends fail. A leader renews its lease
// while its account is busy; a dead leader's lease lapses after LeaseTTL
// and the next gateway with a command takes it by compare-and-set. Until
// then the others decide themselves (their forwards find no one).
const (
	LeaseTTL         = 3 * time.Second
	leaseRenewBefore = LeaseTTL / 2           // renew when less than this is left
	leaseMargin      = 250 * time.Millisecond // stop leading this early (clock skew)
	forwardWaitMax   = 5 * time.Second        // one forwarded command, decision included
	maxLeads         = maxLanes               // lease states kept
)

// Lead makes this keeper take part in account leases: it decides an
// account's commands itself while it holds the account's lease and
// forwards them to the lease holder otherwise. Call it before the first
// command; without it every command is decided here. Leases are signed
// with SignKey and count only when they verify with keys (the ledger's
// enrolled gateways); forwards and their answers carry a MAC under
// forwardKey (ForwardKey of the ledger's fingerprint key) and count only
// with a valid one (sealed.go). Nil keys or forwardKey check nothing, for a
// keeper outside a gateway.
func (k *Keeper) Lead(leases Leases, fwd Forwarder, keys ledger.Keys, forwardKey []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.leases, k.fwd, k.keys, k.forwardKey = leases, fwd, keys, forwardKey
}

// LeadEvent is one thing that happened to account leadership on this
// gateway, for operators (telemetry counts them): leases taken and lost,
// commands forwarded and how their forward ended, commands served for
// other gateways.
type LeadEvent string

// The lead events.
const (
	LeaseTaken      LeadEvent = "lease_taken"       // this gateway took a free or lapsed lease
	LeaseRenewed    LeadEvent = "lease_renewed"     // this gateway extended its lease
	LeaseLost       LeadEvent = "lease_lost"        // a renewal failed: read the lease again
	ForwardAnswered LeadEvent = "forward_answered"  // a forwarded command got the leader's answer (a refusal included)
	ForwardNoLeader LeadEvent = "forward_no_leader" // nobody served the leader: decided here instead
	ForwardUnknown  LeadEvent = "forward_unknown"   // sent, no answer: the caller gets an unknown outcome
	ForwardServed   LeadEvent = "forward_served"    // a command another gateway forwarded, decided here
	// ForwardRejected: a forwarded command or an answer without a valid
	// MAC, or a lease record no enrolled gateway signed (a client with the
	// gateway user's NATS credentials but none of the ledger's keys): the
	// command was refused, the answer not believed (decided here instead),
	// the lease taken as free.
	ForwardRejected LeadEvent = "forward_rejected"
)

// LeadEvents are all lead events, in the order above.
var LeadEvents = []LeadEvent{LeaseTaken, LeaseRenewed, LeaseLost, ForwardAnswered, ForwardNoLeader, ForwardUnknown, ForwardServed, ForwardRejected}

// OnLead, when set before the first command, is told every LeadEvent.
// It must not block.
func (k *Keeper) OnLead(f func(LeadEvent)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.onLead = f
}

func (k *Keeper) leadEvent(e LeadEvent) {
	k.mu.Lock()
	f := k.onLead
	k.mu.Unlock()
	if f != nil {
		f(e)
	}
}

// leadState is what this gateway knows of one account's lease.
type leadState struct {
	mu          sync.Mutex
	contended   bool // another gateway wrote the account since this one decided on it
	known       bool
	lease       Lease
	rev         uint64
	renewing    bool
	unreachable time.Time // the holder did not answer: decide here until then
}

func (k *Keeper) leadOf(account string) *leadState {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.leads[account]
	if !ok {
		if len(k.leads) >= maxLeads {
			clear(k.leads) // forgotten leases are read again
		}
		st = &leadState{}
		k.leads[account] = st
	}
	return st
}

// route says where account's commands go now: "" to decide here, else the
// gateway to forward to.
func (k *Keeper) route(ctx context.Context, account string) string {
	k.mu.Lock()
	leases := k.leases
	k.mu.Unlock()
	if leases == nil {
		return ""
	}
	st := k.leadOf(account)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.contended {
		return "" // nobody else writes this account: no lease needed
	}
	now := time.Now()
	if !st.known || !k.current(st, now) {
		k.readLease(ctx, leases, account, st, now)
	}
	switch {
	case !st.known: // the lease store failed: decide here (still compare-and-set)
		return ""
	case st.lease.Gateway == k.gatewayID:
		if st.lease.Expires.Sub(now) < leaseRenewBefore && !st.renewing {
			st.renewing = true
			go k.renew(leases, account, st)
		}
		return ""
	case now.Before(st.unreachable):
		return ""
	}
	return st.lease.Gateway
}

// current reports whether the cached lease still routes: held by this
// gateway with some margin left, or by another one and not expired.
func (k *Keeper) current(st *leadState, now time.Time) bool {
	if st.lease.Gateway == k.gatewayID {
		return now.Before(st.lease.Expires.Add(-leaseMargin))
	}
	return st.lease.Gateway != "" && now.Before(st.lease.Expires)
}

// readLease reads the account's lease and, when it is free or lapsed,
// takes it by compare-and-set. st.mu is held, so one caller per account
// reads while the others wait for its answer.
func (k *Keeper) readLease(ctx context.Context, leases Leases, account string, st *leadState, now time.Time) {
	for range 2 {
		l, rev, err := leases.Lease(ctx, account)
		if err != nil {
			st.known = false
			return
		}
		if l.Gateway != "" && !k.leaseValid(account, l) {
			k.leadEvent(ForwardRejected)
			l = Lease{} // forged: free, taken over at its revision
		}
		st.known, st.lease, st.rev = true, l, rev
		if k.current(st, now) && l.Gateway != k.gatewayID {
			return
		}
		mine := k.signLease(account, Lease{Gateway: k.gatewayID, Expires: now.Add(LeaseTTL)})
		nrev, err := leases.PutLease(ctx, account, mine, rev)
		if err == nil {
			st.lease, st.rev, st.unreachable = mine, nrev, time.Time{}
			k.leadEvent(LeaseTaken)
			return
		}
		if !errors.Is(err, ledger.ErrConflict) {
			st.known = false
			return
		}
		// Another gateway took it first: read who.
	}
}

// renew extends this gateway's lease on account.
func (k *Keeper) renew(leases Leases, account string, st *leadState) {
	ctx, cancel := context.WithTimeout(context.Background(), leaseRenewBefore)
	defer cancel()
	st.mu.Lock()
	rev := st.rev
	st.mu.Unlock()
	mine := k.signLease(account, Lease{Gateway: k.gatewayID, Expires: time.Now().Add(LeaseTTL)})
	nrev, err := leases.PutLease(ctx, account, mine, rev)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.renewing = false
	switch {
	case err == nil && st.rev == rev:
		st.lease, st.rev = mine, nrev
		k.leadEvent(LeaseRenewed)
	case err != nil:
		st.known = false // read it again on the next command
		k.leadEvent(LeaseLost)
	}
}

// contended notes that another gateway wrote the account: from now on
// this gateway asks for the account's lease (and forwards to its holder).
// An account only one gateway writes never touches the lease stream.
func (k *Keeper) contended(account string) {
	k.mu.Lock()
	on := k.leases != nil
	k.mu.Unlock()
	if !on {
		return
	}
	st := k.leadOf(account)
	st.mu.Lock()
	st.contended = true
	st.mu.Unlock()
}

// unreachable notes that the account's leader did not answer: this gateway
// decides the account's commands itself until the lease lapses.
func (k *Keeper) unreachable(account, gateway string) {
	st := k.leadOf(account)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lease.Gateway == gateway {
		st.unreachable = st.lease.Expires
	}
}

// Command is one budget command as it travels to the leading gateway.
type Command struct {
	Op       string                 `json:"op"` // reserve, settle, release
	Account  string                 `json:"account"`
	Reserve  *budget.ReserveRequest `json:"reserve,omitempty"`
	OpKey    string                 `json:"op_key,omitempty"`
	Amount   int64                  `json:"amount,omitempty"`
	Evidence *budget.Evidence       `json:"evidence,omitempty"`
}

// The commands that are forwarded (a limit is set where it is asked for).
const (
	opReserve = "reserve"
	opSettle  = "settle"
	opRelease = "release"
)

// reply is a forwarded command's answer.
type reply struct {
	Decision []byte           `json:"decision,omitempty"` // pb.BudgetDecision
	Account  *budget.Account  `json:"account,omitempty"`
	Outcome  budget.Outcome   `json:"outcome,omitempty"`
	Reserve  *budget.Decision `json:"reserve,omitempty"`
	Err      string           `json:"err,omitempty"`
	Code     int              `json:"code,omitempty"` // 1 + index in wireErrors
}

// wireErrors are the errors a forwarded answer names, so that a caller
// sees the same error from every gateway.
var wireErrors = []error{
	budget.ErrUnknownAccount, budget.ErrMissingKey, budget.ErrInvalidAmount, budget.ErrOverflow,
	budget.ErrCurrency, budget.ErrKeyReuse, budget.ErrNotHeld, budget.ErrAlreadyClosed,
	budget.ErrLimitNotValid, budget.ErrTooManyHolds, budget.ErrInvalidRequest, budget.ErrInvalidEvent,
	budget.ErrBrokenInvariant, budget.ErrBadAccount, ledger.ErrContended, ledger.ErrConflict,
	ledger.ErrAppendUnknown, ledger.ErrNotFound, ledger.ErrInvalid, errForwardRefused,
}

// errForwardRefused: the leading gateway could not check the forward's
// MAC (or it was not valid), so it decided nothing; the sender
// decides the command itself.
var errForwardRefused = errors.New("the leading gateway refused the forward")

// remoteError is an error the leading gateway answered.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// ServeForward decides a command another gateway forwarded (always here,
// never forwarded again) and returns the answer to send back, with its
// MAC. A forward without a valid MAC for this gateway is refused and
// decides nothing.
func (k *Keeper) ServeForward(ctx context.Context, req []byte) []byte {
	var c Command
	var rp reply
	s, err := k.open(req, "", "")
	if err != nil {
		k.leadEvent(ForwardRejected)
		rp.Err, rp.Code = fmt.Sprintf("forwarded command refused: %v", err), codeOf(errForwardRefused)
		out, _ := json.Marshal(rp)
		var claimed sealed // addressed to its claimed sender: a forger learns nothing from it
		_ = json.Unmarshal(req, &claimed)
		return k.seal(claimed.From, out, hashOf(req))
	}
	k.leadEvent(ForwardServed)
	if err := json.Unmarshal(s.Body, &c); err != nil {
		rp.Err, rp.Code = fmt.Sprintf("forwarded command: %v", err), codeOf(ledger.ErrInvalid)
	} else if res, dec, err := k.runHere(ctx, c); err != nil {
		rp.Err, rp.Code = err.Error(), codeOf(err)
	} else {
		rp.Account, rp.Outcome, rp.Reserve = res.Account, res.Outcome, dec
		if res.Decision != nil {
			rp.Decision, _ = proto.Marshal(res.Decision)
		}
	}
	out, _ := json.Marshal(rp) // plain structs: never fails
	return k.seal(s.From, out, hashOf(req))
}

func codeOf(err error) int {
	for i, e := range wireErrors {
		if errors.Is(err, e) {
			return i + 1
		}
	}
	return 0
}

// errForgedAnswer: the forward's answer did not come from the gateway it
// went to (sealed.go), so it was not believed; the command is decided here
// (safe even if the leader decided it too: commands are idempotent on
// their operation key, and every decision is a compare-and-set append).
var errForgedAnswer = errors.New("the forward's answer is not the leading gateway's")

// forward sends c to gateway, signed, and reads its answer.
func (k *Keeper) forward(ctx context.Context, gateway string, c Command) (Result, *budget.Decision, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return Result{}, nil, fmt.Errorf("forward: %w", err)
	}
	req := k.seal(gateway, body, "")
	fctx, cancel := context.WithTimeout(ctx, forwardWaitMax)
	defer cancel()
	out, err := k.fwd.Forward(fctx, gateway, req)
	if errors.Is(err, ErrNoLeader) {
		k.leadEvent(ForwardNoLeader)
		return Result{}, nil, err
	}
	if err != nil {
		k.leadEvent(ForwardUnknown)
		return Result{}, nil, fmt.Errorf("%w: forwarded to gateway %s: %v", ledger.ErrAppendUnknown, gateway, err)
	}
	s, err := k.open(out, gateway, hashOf(req))
	if err != nil {
		k.leadEvent(ForwardRejected)
		return Result{}, nil, fmt.Errorf("%w: %v", errForgedAnswer, err)
	}
	var rp reply
	if err := json.Unmarshal(s.Body, &rp); err != nil {
		k.leadEvent(ForwardUnknown)
		return Result{}, nil, fmt.Errorf("%w: answer of gateway %s: %v", ledger.ErrAppendUnknown, gateway, err)
	}
	k.leadEvent(ForwardAnswered)
	if rp.Err != "" {
		var kind error = ledger.ErrAppendUnknown
		if rp.Code > 0 && rp.Code <= len(wireErrors) {
			kind = wireErrors[rp.Code-1]
		}
		return Result{}, nil, &remoteError{msg: rp.Err, kind: kind}
	}
	res := Result{Account: rp.Account, Outcome: rp.Outcome}
	if len(rp.Decision) > 0 {
		res.Decision = new(pb.BudgetDecision)
		if err := proto.Unmarshal(rp.Decision, res.Decision); err != nil {
			return Result{}, nil, fmt.Errorf("%w: answer of gateway %s: %v", ledger.ErrAppendUnknown, gateway, err)
		}
	}
	return res, rp.Reserve, nil
}

// run decides c: forwarded to the account's leader when another gateway
// leads it, here otherwise (also when the leader does not answer).
func (k *Keeper) run(ctx context.Context, c Command) (Result, *budget.Decision, error) {
	if !budget.ValidAccountName(c.Account) {
		return Result{}, nil, fmt.Errorf("account %q: %w", c.Account, budget.ErrBadAccount)
	}
	if to := k.route(ctx, c.Account); to != "" {
		res, dec, err := k.forward(ctx, to, c)
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, errForgedAnswer) && !errors.Is(err, errForwardRefused) {
			return res, dec, err
		}
		k.unreachable(c.Account, to)
	}
	return k.runHere(ctx, c)
}

// runHere decides c on this gateway.
func (k *Keeper) runHere(ctx context.Context, c Command) (Result, *budget.Decision, error) {
	switch c.Op {
	case opReserve:
		if c.Reserve == nil {
			return Result{}, nil, fmt.Errorf("reserve without a request: %w", budget.ErrInvalidRequest)
		}
		r := *c.Reserve
		var dec budget.Decision
		res, err := k.decide(ctx, c.Account, r.OperationKey, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
			var err error
			dec, err = budget.Reserve(a, r, now)
			return dec.Event, dec.Outcome, err
		})
		if err != nil {
			return Result{}, nil, err
		}
		if res.Decision == nil { // a retry: nothing appended
			res.Decision = &pb.BudgetDecision{
				Outcome: string(dec.Outcome), Account: c.Account, OperationKey: dec.Hold.OperationKey,
				RequestDigest: dec.Hold.RequestDigest, Amount: dec.Hold.Amount, Currency: res.Account.Currency,
				Limit: dec.Limit, LimitDigest: res.Account.LimitDigest, SpentSeen: res.Account.Spent, HeldSeen: res.Account.Held,
				AccountVersion: res.Account.Version, WithinLimit: proto.Bool(dec.WithinLimit), Allowed: proto.Bool(dec.Allowed), Total: dec.Total,
			}
		}
		dec.Event = nil // res.Decision is the event appended
		return res, &dec, nil
	case opSettle, opRelease:
		var ev budget.Evidence
		if c.Evidence != nil {
			ev = *c.Evidence
		}
		opKey, amount, settle := c.OpKey, c.Amount, c.Op == opSettle
		res, err := k.decide(ctx, c.Account, opKey, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
			var e budget.Event
			var err error
			if settle {
				e, err = budget.Settle(a, opKey, amount, ev, now)
			} else {
				e, err = budget.Release(a, opKey, ev, now)
			}
			return &e, "", err
		})
		return res, nil, err
	}
	return Result{}, nil, fmt.Errorf("unknown command %q: %w", c.Op, budget.ErrInvalidRequest)
}

// InMemory reports what this gateway keeps folded in memory for an
// account: its open holds and the closed operations the views did not
// hold yet at its last decision (the rest are rows in the views).
func (k *Keeper) InMemory(account string) (holds, closed int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h, ok := k.own[account]; ok && h.Account != nil {
		holds = len(h.Account.Holds)
	}
	return holds, len(k.recent[account])
}
