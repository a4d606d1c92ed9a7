// Package keeper runs the budget's decisions against the ledger: it reads an
// account (this gateway's own last write or the views), lets the pure
// budget package decide, and appends the decision's event with
// compare-and-set on the account's subject, so concurrent gateways can never
// over-commit a limit. A conflict means another gateway moved first: wait
// for the views to reach what it wrote, and decide again.
//
// It imports no NATS, Pebble or Connect; it uses the ledger's Log port.
package keeper

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Stream and subjects of the budget: one subject per account.
const (
	Stream        = "PORTCULLIS_BUDGET"
	subjectPrefix = "pc.budget."
	maxRounds     = 512
	groupWaitMax  = 30 * time.Second // one group's decision, including catch-ups
	maxLanes      = 1 << 14          // idle lanes are dropped beyond this
)

// Subjects are the subjects the budget stream captures.
var Subjects = []string{subjectPrefix + "*"}

// Subject is the subject that owns an account's decisions.
func Subject(account string) string { return subjectPrefix + account }

// AccountFromSubject is the account a subject belongs to.
func AccountFromSubject(subject string) (string, bool) {
	if len(subject) <= len(subjectPrefix) || subject[:len(subjectPrefix)] != subjectPrefix {
		return "", false
	}
	a := subject[len(subjectPrefix):]
	return a, budget.ValidAccountName(a)
}

// Head is an account as of its latest event.
type Head struct {
	Seq     uint64
	Hash    []byte
	Account *budget.Account
}

// Views are the budget's read models (projector/pebble).
type Views interface {
	// Account is the account as the views hold it (ledger.ErrNotFound: none).
	// Its Closed map may hold only some of the closed operations (the views
	// keep each closed operation as a row of its own, so an account's
	// history does not make every decision slower): ClosedOp finds the rest.
	Account(ctx context.Context, name string) (Head, error)
	// ClosedOp is one closed (spent or released) operation of an account as
	// the views hold it; ok is false when the views know no such operation.
	ClosedOp(ctx context.Context, account, opKey string) (c budget.Closed, ok bool, err error)
	// BudgetWaitFor blocks until the views hold the budget stream up to seq.
	BudgetWaitFor(ctx context.Context, seq uint64) error
	// BudgetApplied is the budget stream sequence the views hold now.
	BudgetApplied() uint64
}

// Keeper decides budget commands. Safe for concurrent use; many keepers
// (gateways) may share one Log.
type Keeper struct {
	log       ledger.Log
	views     Views
	gatewayID string
	now       func() time.Time

	// SignKey signs every event this keeper writes (nil: unsigned).
	SignKey ed25519.PrivateKey
	// signer signs with SignKey, its nonces made ahead (signEvent).
	signer atomic.Pointer[ledger.Presigner]

	mu      sync.Mutex
	own     map[string]Head                     // this gateway's last write per account, folded in memory
	closing map[string][]closedAt               // per account: what recent holds, in stream order
	recent  map[string]map[string]budget.Closed // per account: operations this gateway closed that the views may not hold yet
	lanes   map[string]*lane                    // per-account command queues
	leads   map[string]*leadState               // per-account lease as this gateway knows it
	leases  Leases                              // nil: every command is decided here
	fwd     Forwarder
	keys    ledger.Keys // enrolled gateways' keys: leases are checked against them (nil: not checked)
	// forwardKey authenticates forwards and their answers (nil: not checked)
	forwardKey []byte
	onLead     func(LeadEvent) // nil: nobody counts lead events
}

// closedAt is a closed operation this gateway wrote and the stream
// sequence that closed it.
type closedAt struct {
	seq uint64
	key string
}

// New returns a Keeper.
func New(log ledger.Log, views Views, gatewayID string, now func() time.Time) *Keeper {
	if now == nil {
		now = time.Now
	}
	return &Keeper{log: log, views: views, gatewayID: gatewayID, now: now, own: map[string]Head{}, closing: map[string][]closedAt{}, recent: map[string]map[string]budget.Closed{},
		lanes: map[string]*lane{}, leads: map[string]*leadState{}}
}

// Result is a decided command: the decision (or the answer for a retry)
// and the account after it.
type Result struct {
	Decision *pb.BudgetDecision
	Account  *budget.Account
	Outcome  budget.Outcome
}

// SetLimit creates an account or replaces its limit.
func (k *Keeper) SetLimit(ctx context.Context, l budget.Limit) (Result, error) {
	return k.decide(ctx, l.Account, "", func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
		var cur *budget.Account
		if a.Version > 0 {
			cur = a
		}
		e, err := budget.SetLimit(cur, l, now)
		return &e, "", err
	})
}

// Reserve decides a reservation; a denial is recorded and answered, not an
// error. The decision's Event is nil: the event appended is the result's
// Decision, on the gateway that decided and on one that forwarded alike
// (a forward's answer carries it once, not in two encodings).
func (k *Keeper) Reserve(ctx context.Context, account string, r budget.ReserveRequest) (Result, *budget.Decision, error) {
	return k.run(ctx, Command{Op: opReserve, Account: account, Reserve: &r})
}

// Settle moves a hold to spent (less than held releases the rest).
func (k *Keeper) Settle(ctx context.Context, account, opKey string, amount int64, ev budget.Evidence) (Result, error) {
	res, _, err := k.run(ctx, Command{Op: opSettle, Account: account, OpKey: opKey, Amount: amount, Evidence: &ev})
	return res, err
}

// Release ends a hold without spending.
func (k *Keeper) Release(ctx context.Context, account, opKey string, ev budget.Evidence) (Result, error) {
	res, _, err := k.run(ctx, Command{Op: opRelease, Account: account, OpKey: opKey, Evidence: &ev})
	return res, err
}

// Account reads an account as of the latest decision on it in the log,
// whichever gateway made it: it asks the log for the account subject's
// last sequence and waits for the views to hold it (one round trip), so a
// read after a write through any gateway sees the write.
func (k *Keeper) Account(ctx context.Context, name string) (Head, error) {
	if !budget.ValidAccountName(name) {
		return Head{}, fmt.Errorf("account %q: %w", name, budget.ErrBadAccount)
	}
	last, err := k.log.Last(ctx, Subject(name))
	if errors.Is(err, ledger.ErrNotFound) {
		return Head{}, fmt.Errorf("account %q: %w", name, budget.ErrUnknownAccount)
	}
	if err != nil {
		return Head{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, groupWaitMax)
	defer cancel()
	if err := k.views.BudgetWaitFor(wctx, last.Seq); err != nil {
		return Head{}, fmt.Errorf("account %q: views behind sequence %d: %w", name, last.Seq, err)
	}
	h, err := k.head(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) {
		return Head{}, fmt.Errorf("account %q: %w", name, budget.ErrUnknownAccount)
	}
	return h, err
}

type decideFunc func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error)

// command is one caller's command waiting in its account's lane.
type command struct {
	f    decideFunc
	key  string // the operation key the command decides on ("" for none)
	res  Result
	err  error
	done chan struct{}
}

// lane serializes one account's commands on this gateway and coalesces
// those that arrive while a decision is in flight into the next one: a hot
// account is decided in groups, each group appended as one atomic decision
// (the first event's condition covers the rest), instead of every caller
// racing every other for the account's subject.
type lane struct {
	mu    sync.Mutex
	queue []*command
	busy  bool
}

// maxGroup bounds how many commands one decision carries.
const maxGroup = 256

func (k *Keeper) lane(account string) *lane {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.lanes[account]
	if !ok {
		if len(k.lanes) >= maxLanes {
			for name, old := range k.lanes { // drop idle lanes
				old.mu.Lock()
				idle := !old.busy && len(old.queue) == 0
				old.mu.Unlock()
				if idle {
					delete(k.lanes, name)
				}
			}
		}
		l = &lane{}
		k.lanes[account] = l
	}
	return l
}

// decide runs one command: it joins the account's lane and waits for its
// answer.
func (k *Keeper) decide(ctx context.Context, account, opKey string, f decideFunc) (Result, error) {
	if !budget.ValidAccountName(account) {
		return Result{}, fmt.Errorf("account %q: %w", account, budget.ErrBadAccount)
	}
	cmd := &command{f: f, key: opKey, done: make(chan struct{})}
	l := k.lane(account)
	l.mu.Lock()
	l.queue = append(l.queue, cmd)
	if !l.busy {
		l.busy = true
		go k.drain(account, l)
	}
	l.mu.Unlock()
	select {
	case <-cmd.done:
		return cmd.res, cmd.err
	case <-ctx.Done():
		return Result{}, fmt.Errorf("%w: %v", ledger.ErrAppendUnknown, ctx.Err())
	}
}

// drain decides the lane's groups (everything queued, up to maxGroup) one
// after another until the lane is empty. It runs on its own, so no caller
// decides for others and a caller that gives up stalls nobody.
func (k *Keeper) drain(account string, l *lane) {
	for {
		l.mu.Lock()
		n := min(len(l.queue), maxGroup)
		if n == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		group := l.queue[:n:n]
		l.queue = l.queue[n:]
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), groupWaitMax)
		k.decideGroup(ctx, account, group)
		cancel()
	}
}

// decideGroup decides a group of commands in order against one read of the
// account and appends their events as one decision; on a conflict it
// catches up and decides the whole group again. Commands that append
// nothing (errors, retries answered from the account) are answered only
// once the group's events have landed, so every answer follows from a
// state the log holds.
func (k *Keeper) decideGroup(ctx context.Context, account string, group []*command) {
	caughtUp := false
	fresh := false // read the views too, not only this gateway's own state
	finish := func(c *command, r Result, err error) {
		c.res, c.err = r, err
		close(c.done)
	}
	for range maxRounds {
		h, err := k.decideHead(ctx, account, fresh)
		if errors.Is(err, ledger.ErrNotFound) {
			// A new account; h.Seq is its subject's last sequence when it
			// holds only quarantined messages.
			h, err = Head{Seq: h.Seq, Account: &budget.Account{}}, nil
		}
		if err != nil {
			for _, c := range group {
				finish(c, Result{}, err)
			}
			return
		}
		state := h.Account.Clone()
		if err := k.loadClosed(ctx, account, state, group); err != nil {
			for _, c := range group {
				finish(c, Result{}, err)
			}
			return
		}
		now := k.now()
		type answer struct {
			res   Result
			err   error
			event int // index in evs, -1 when nothing is appended
		}
		answers := make([]answer, len(group))
		var decs []*pb.BudgetDecision
		var states []*budget.Account
		holds := holdCache{}
		unknown := false
		summary := func(a *budget.Account) *budget.Account {
			cp := *a // the answer needs the totals, not the maps
			cp.Holds, cp.Closed = nil, nil
			return &cp
		}
		for i, c := range group {
			e, outcome, err := c.f(state, now) // decision functions never change the account
			if errors.Is(err, budget.ErrUnknownAccount) || errors.Is(err, budget.ErrNotHeld) {
				// An absence in a state read from memory or the views proves
				// nothing: another gateway may have just created the account
				// or opened the hold. Catch up once and decide again.
				unknown = true
			}
			if err != nil || e == nil {
				answers[i] = answer{res: Result{Account: summary(state), Outcome: outcome}, err: err, event: -1}
				continue
			}
			if err := state.Apply(*e); err != nil {
				panic(fmt.Sprintf("keeper: decided an event that does not fold: %v", err))
			}
			answers[i] = answer{res: Result{Outcome: outcome}, event: len(decs)}
			decs = append(decs, toProto(*e, holds))
			states = append(states, summary(state))
		}
		if unknown && !caughtUp {
			caughtUp = true
			if err := k.catchUp(ctx, nil); err == nil {
				fresh = true
				continue
			}
		}
		var seqs []uint64
		var msgs []ledger.Message
		var msgOf []int
		if len(decs) > 0 {
			msgs, msgOf = k.pack(account, h.Seq, h.Hash, decs, now)
			seqs, err = k.log.Append(ctx, msgs...)
			if errors.Is(err, ledger.ErrConflict) {
				// Another gateway wrote: this gateway's state is stale.
				k.contended(account)
				k.mu.Lock()
				delete(k.own, account)
				delete(k.closing, account)
				delete(k.recent, account)
				k.mu.Unlock()
				if err := k.catchUp(ctx, err); err != nil {
					for _, c := range group {
						finish(c, Result{}, err)
					}
					return
				}
				fresh = true
				continue
			}
			if err != nil {
				for _, c := range group {
					finish(c, Result{}, err)
				}
				return
			}
			last := len(msgs) - 1
			// Memory keeps the open holds; what this group closed waits in
			// recent until the views hold it, what it loaded is in the views.
			kept := *state
			kept.Closed = nil
			nh := Head{Seq: seqs[last], Hash: msgs[last].Event.Hash, Account: &kept}
			k.mu.Lock()
			if k.own[account].Seq < nh.Seq {
				k.own[account] = nh
				for i, d := range decs {
					if o := d.GetOutcome(); o == string(budget.Settled) || o == string(budget.Released) {
						key := d.GetOperationKey()
						if k.recent[account] == nil {
							k.recent[account] = map[string]budget.Closed{}
						}
						k.recent[account][key] = state.Closed[key]
						k.closing[account] = append(k.closing[account], closedAt{seq: seqs[msgOf[i]], key: key})
					}
				}
			}
			k.mu.Unlock()
		}
		for i, c := range group {
			a := answers[i]
			if a.event >= 0 {
				d := decs[a.event]
				d.StreamSeq = seqs[msgOf[a.event]]
				a.res.Decision, a.res.Account = d, states[a.event]
			}
			finish(c, a.res, a.err)
		}
		return
	}
	for _, c := range group {
		finish(c, Result{}, ledger.ErrContended)
	}
}

// decideHead is the account a group decides on. Unless fresh, this
// gateway's own last write, folded in memory, is taken as it is: when
// another gateway wrote since, the append's condition fails and the next
// round reads fresh. It holds the totals and the open holds only, so what
// a decision copies does not grow with the account's history; loadClosed
// brings in the closed operations the group names.
func (k *Keeper) decideHead(ctx context.Context, account string, fresh bool) (Head, error) {
	if !fresh {
		k.mu.Lock()
		own, ok := k.own[account]
		k.pruneLocked(account)
		k.mu.Unlock()
		if ok {
			return own, nil
		}
	}
	return k.head(ctx, account)
}

// pruneLocked forgets the recently closed operations of account that the
// views hold now (k.mu held).
func (k *Keeper) pruneLocked(account string) {
	cl := k.closing[account]
	if len(cl) == 0 {
		return
	}
	applied := k.views.BudgetApplied()
	n := 0
	for n < len(cl) && cl[n].seq <= applied {
		delete(k.recent[account], cl[n].key)
		n++
	}
	switch {
	case n == len(cl):
		delete(k.closing, account)
		delete(k.recent, account)
	case n > 0:
		k.closing[account] = cl[n:]
	}
}

// head is the newer of this gateway's own last write and the views. When
// its own write is newer, the closed operations the views already hold
// are dropped from the copy it returns (loadClosed finds them there), so
// the state a decision copies stays small however long the account's
// history is.
func (k *Keeper) head(ctx context.Context, account string) (Head, error) {
	k.mu.Lock()
	own, ok := k.own[account]
	k.mu.Unlock()
	v, err := k.views.Account(ctx, account)
	switch {
	case err == nil && v.Seq > own.Seq:
		return v, nil
	case err != nil && !errors.Is(err, ledger.ErrNotFound):
		return Head{}, err
	case ok:
		if err == nil && len(own.Account.Closed) > 0 {
			a := *own.Account
			a.Closed = make(map[string]budget.Closed)
			for key, c := range own.Account.Closed {
				if c.Version > v.Account.Version { // not in the views yet
					a.Closed[key] = c
				}
			}
			own.Account = &a
		}
		return own, nil
	case err == nil:
		return v, nil
	}
	return Head{Seq: v.Seq}, ledger.ErrNotFound
}

// loadClosed adds to state the closed operations the group's commands
// name that state does not hold open or closed: from the ones this gateway
// closed recently, else from the views. A closed
// operation never reopens, so one the views hold is closed in every later
// state too.
func (k *Keeper) loadClosed(ctx context.Context, account string, state *budget.Account, group []*command) error {
	for _, c := range group {
		if c.key == "" {
			continue
		}
		if _, held := state.Holds[c.key]; held {
			continue
		}
		if _, closed := state.Closed[c.key]; closed {
			continue
		}
		k.mu.Lock()
		cl, ok := k.recent[account][c.key]
		k.mu.Unlock()
		if ok && cl.Version <= state.Version { // closed by this gateway, maybe not in the views yet
			if state.Closed == nil {
				state.Closed = map[string]budget.Closed{}
			}
			state.Closed[c.key] = cl
			continue
		}
		cl, ok, err := k.views.ClosedOp(ctx, account, c.key)
		if err != nil {
			return err
		}
		if ok && cl.Version <= state.Version {
			if state.Closed == nil {
				state.Closed = map[string]budget.Closed{}
			}
			state.Closed[c.key] = cl
		}
	}
	return nil
}

func (k *Keeper) catchUp(ctx context.Context, conflict error) error {
	return ledger.CatchUp(ctx, k.log, k.views.BudgetWaitFor, conflict)
}
