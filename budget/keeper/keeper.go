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
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Stream and subjects of the budget: one subject per account.
const (
	Stream        = "PORTCULLIS_BUDGET"
	subjectPrefix = "pc.budget."
	maxRounds     = 512
	catchUpMax    = 10 * time.Second
)

// Subjects are the subjects the budget stream captures.
var Subjects = []string{subjectPrefix + "*"}

var accountName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Subject is the subject that owns an account's decisions.
func Subject(account string) string { return subjectPrefix + account }

// AccountFromSubject is the account a subject belongs to.
func AccountFromSubject(subject string) (string, bool) {
	if len(subject) <= len(subjectPrefix) || subject[:len(subjectPrefix)] != subjectPrefix {
		return "", false
	}
	a := subject[len(subjectPrefix):]
	return a, accountName.MatchString(a)
}

// ErrBadAccount: an account name that cannot be a subject token.
var ErrBadAccount = errors.New("account names are 1-64 of A-Z a-z 0-9 _ -")

// Head is an account as of its latest event.
type Head struct {
	Seq     uint64
	Hash    []byte
	Account *budget.Account
}

// Views are the budget's read models (projector/pebble).
type Views interface {
	// Account is the account as the views hold it (ledger.ErrNotFound: none).
	Account(ctx context.Context, name string) (Head, error)
	// BudgetWaitFor blocks until the views hold the budget stream up to seq.
	BudgetWaitFor(ctx context.Context, seq uint64) error
}

// Keeper decides budget commands. Safe for concurrent use; many keepers
// (gateways) may share one Log.
type Keeper struct {
	log       ledger.Log
	views     Views
	gatewayID string
	now       func() time.Time

	mu  sync.Mutex
	own map[string]Head // this gateway's last write per account
}

// New returns a Keeper.
func New(log ledger.Log, views Views, gatewayID string, now func() time.Time) *Keeper {
	if now == nil {
		now = time.Now
	}
	return &Keeper{log: log, views: views, gatewayID: gatewayID, now: now, own: map[string]Head{}}
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
	return k.decide(ctx, l.Account, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
		var cur *budget.Account
		if a.Version > 0 {
			cur = a
		}
		e, err := budget.SetLimit(cur, l, now)
		return &e, "", err
	})
}

// Reserve decides a reservation; a denial is recorded and answered, not an error.
func (k *Keeper) Reserve(ctx context.Context, account string, r budget.ReserveRequest) (Result, *budget.Decision, error) {
	var dec budget.Decision
	res, err := k.decide(ctx, account, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
		var err error
		dec, err = budget.Reserve(a, r, now)
		return dec.Event, dec.Outcome, err
	})
	if err != nil {
		return Result{}, nil, err
	}
	if res.Decision == nil { // a retry: nothing appended
		res.Decision = &pb.BudgetDecision{
			Outcome: string(dec.Outcome), Account: account, OperationKey: dec.Hold.OperationKey,
			RequestDigest: dec.Hold.RequestDigest, Amount: dec.Hold.Amount, Currency: res.Account.Currency,
			Limit: dec.Limit, LimitDigest: res.Account.LimitDigest, SpentSeen: res.Account.Spent, HeldSeen: res.Account.Held,
			AccountVersion: res.Account.Version, WithinLimit: dec.WithinLimit, Allowed: dec.Allowed, Total: dec.Total,
		}
	}
	return res, &dec, nil
}

// Settle moves a hold to spent (less than held releases the rest).
func (k *Keeper) Settle(ctx context.Context, account, opKey string, amount int64, ev budget.Evidence) (Result, error) {
	return k.decide(ctx, account, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
		e, err := budget.Settle(a, opKey, amount, ev, now)
		return &e, "", err
	})
}

// Release ends a hold without spending.
func (k *Keeper) Release(ctx context.Context, account, opKey string, ev budget.Evidence) (Result, error) {
	return k.decide(ctx, account, func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error) {
		e, err := budget.Release(a, opKey, ev, now)
		return &e, "", err
	})
}

// Account reads an account; after a miss it catches up with the stream
// first, so an account another gateway just created is found.
func (k *Keeper) Account(ctx context.Context, name string) (Head, error) {
	if !accountName.MatchString(name) {
		return Head{}, fmt.Errorf("account %q: %w", name, ErrBadAccount)
	}
	h, err := k.head(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) {
		if err := k.catchUp(ctx, nil); err != nil {
			return Head{}, err
		}
		h, err = k.head(ctx, name)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return Head{}, fmt.Errorf("account %q: %w", name, budget.ErrUnknownAccount)
	}
	return h, err
}

type decideFunc func(a *budget.Account, now time.Time) (*budget.Event, budget.Outcome, error)

// decide runs one command: read, decide, append under CAS, catch up on
// conflict. Nothing is appended when the decision is an error or a retry.
func (k *Keeper) decide(ctx context.Context, account string, f decideFunc) (Result, error) {
	if !accountName.MatchString(account) {
		return Result{}, fmt.Errorf("account %q: %w", account, ErrBadAccount)
	}
	caughtUp := false
	for range maxRounds {
		h, err := k.head(ctx, account)
		if errors.Is(err, ledger.ErrNotFound) {
			h, err = Head{Account: &budget.Account{}}, nil
		}
		if err != nil {
			return Result{}, err
		}
		e, outcome, err := f(h.Account.Clone(), k.now())
		if errors.Is(err, budget.ErrUnknownAccount) && !caughtUp {
			caughtUp = true // another gateway may have just created it
			if err := k.catchUp(ctx, nil); err != nil {
				return Result{}, err
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if e == nil {
			return Result{Account: h.Account, Outcome: outcome}, nil
		}
		next := h.Account.Clone()
		if err := next.Apply(*e); err != nil {
			panic(fmt.Sprintf("keeper: decided an event that does not fold: %v", err))
		}
		ev := &pb.Event{
			EventId: "evt_" + ulid.Make().String(), Type: EventType(e.Kind), Subject: Subject(account),
			TimeUnixNano: e.At.UnixNano(), GatewayId: k.gatewayID,
			Body: &pb.Event_BudgetChanged{BudgetChanged: ToProto(*e)},
		}
		ledger.Seal(ev, h.Hash)
		seqs, err := k.log.Append(ctx, ledger.Message{Subject: ev.Subject, ExpectedSeq: h.Seq, Event: ev})
		if errors.Is(err, ledger.ErrConflict) {
			if err := k.catchUp(ctx, err); err != nil {
				return Result{}, err
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		nh := Head{Seq: seqs[0], Hash: ev.Hash, Account: next}
		k.mu.Lock()
		if k.own[account].Seq < nh.Seq {
			k.own[account] = nh
		}
		k.mu.Unlock()
		d := ev.GetBudgetChanged()
		d.StreamSeq = seqs[0]
		return Result{Decision: d, Account: next, Outcome: outcome}, nil
	}
	return Result{}, ledger.ErrContended
}

// head is the newer of this gateway's own last write and the views.
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
		return own, nil
	case err == nil:
		return v, nil
	}
	return Head{}, ledger.ErrNotFound
}

func (k *Keeper) catchUp(ctx context.Context, conflict error) error {
	var seq uint64
	var ce *ledger.ConflictError
	if errors.As(conflict, &ce) {
		seq = ce.ActualSeq
	}
	if seq == 0 {
		var err error
		if seq, err = k.log.LastSeq(ctx); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, catchUpMax)
	defer cancel()
	return k.views.BudgetWaitFor(wctx, seq)
}
