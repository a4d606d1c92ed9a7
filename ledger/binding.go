package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// BudgetHold is the reservation a budget-bound execution needs.
type BudgetHold struct {
	Account       string
	OperationKey  string // the caller's operation key, else the execution id
	RequestDigest string
	Amount        int64
	Currency      string
}

// Budget is the port to the budget ledger. Every call is idempotent by
// operation key, so a decision that is retried after a conflict or a crash
// never counts twice.
type Budget interface {
	// Hold reserves (or finds) the hold; allowed=false with the reason when
	// the budget denies it. Neither the reason nor an error names the
	// account: the ledger does ("budget <account>: …").
	Hold(ctx context.Context, h BudgetHold) (allowed bool, reason string, err error)
	// Settle spends the hold: the effect is confirmed.
	Settle(ctx context.Context, h BudgetHold, ev BudgetEvidence) error
	// Release ends the hold: the effect's absence is proven.
	Release(ctx context.Context, h BudgetHold, ev BudgetEvidence) error
}

// BudgetEvidence is why a hold moves: the execution, the status its target
// answered (0 when none was observed) and a note on what else shows it.
type BudgetEvidence struct {
	ExecutionID  string
	TargetStatus int32
	Note         string
}

// Budget outcomes recorded on the execution.
const (
	BudgetHeld     = "held"
	BudgetDenied   = "denied"
	BudgetSpent    = "spent"
	BudgetReleased = "released"
)

// resolveBinding reads a contract's budget binding against the caller's
// raw arguments.
func resolveBinding(b *contract.BudgetBinding, rawArgs []byte) (account string, amount int64, currency string, err error) {
	var args map[string]any
	if len(rawArgs) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(rawArgs)))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return "", 0, "", fmt.Errorf("%w: arguments: %v", ErrInvalid, err)
		}
	}
	value := func(what, v string) (any, error) {
		p, isPath := contract.ArgumentPath(v)
		if !isPath {
			return v, nil
		}
		var cur any = args
		for _, k := range strings.Split(p, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: budget %s: argument %s is missing", ErrInvalid, what, p)
			}
			if cur, ok = m[k]; !ok {
				return nil, fmt.Errorf("%w: budget %s: argument %s is missing", ErrInvalid, what, p)
			}
		}
		return cur, nil
	}
	str := func(what, v string) (string, error) {
		x, err := value(what, v)
		if err != nil {
			return "", err
		}
		s, ok := x.(string)
		if !ok {
			return "", fmt.Errorf("%w: budget %s must be a string", ErrInvalid, what)
		}
		return s, nil
	}
	if account, err = str("account", b.Account); err != nil {
		return "", 0, "", err
	}
	if !budget.ValidAccountName(account) {
		// Refused like a bad amount, before anything is recorded: recorded,
		// it became a DENIED execution that every retry got back.
		return "", 0, "", fmt.Errorf("%w: budget account %.70q: %w", ErrInvalid, account, budget.ErrBadAccount)
	}
	if b.Currency != "" {
		if currency, err = str("currency", b.Currency); err != nil {
			return "", 0, "", err
		}
	}
	x, err := value("amount", b.Amount)
	if err != nil {
		return "", 0, "", err
	}
	var s string
	switch n := x.(type) {
	case json.Number:
		s = n.String()
	case string:
		s = n
	default:
		return "", 0, "", fmt.Errorf("%w: budget amount must be a whole number of minor units", ErrInvalid)
	}
	// Only the plain decimal form: no sign, no leading zeros, no exponent,
	// so one amount has one spelling.
	amount, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || amount <= 0 || strconv.FormatInt(amount, 10) != s {
		return "", 0, "", fmt.Errorf("%w: budget amount %q must be a positive whole number of minor units", ErrInvalid, s)
	}
	return account, amount, currency, nil
}

// resumedHoldKey is the hold key of a budget-bound execution's dispatch
// number x.DispatchCount after an earlier hold was released.
func resumedHoldKey(x *pb.Execution) string {
	base := x.GetOperationKey()
	if base == "" {
		base = x.GetExecutionId()
	}
	return base + "#dispatch-" + strconv.Itoa(int(x.GetDispatchCount()))
}

func holdOf(x *pb.Execution) BudgetHold {
	return BudgetHold{
		Account: x.GetBudgetAccount(), OperationKey: x.GetBudgetOperationKey(), RequestDigest: x.GetRequestDigest(),
		Amount: x.GetBudgetAmount(), Currency: x.GetBudgetCurrency(),
	}
}

// resultVerdict is what a recorded result means for a budget-bound
// execution's hold.
type resultVerdict int

const (
	// keepHeld: the answer proves neither the effect nor its absence (an
	// HTTP 5xx, 1xx or 3xx, or no status at all): the hold stays open until
	// a later record (Settle or Release with evidence) moves it.
	keepHeld resultVerdict = iota
	// spend: the effect is confirmed (an HTTP 2xx, exit status 0 on ssh, an
	// upstream MCP tool's result that is not an error).
	spend
	// release: the target refused the request, so its answer shows the
	// effect's absence (an HTTP 4xx, a non-zero exit status on ssh, an
	// upstream's isError).
	release
)

// verdictOf reads the result recorded on x. A RESOLVED_COMPLETED without a
// status is a person's word that the effect happened: spend.
func verdictOf(x *pb.Execution, t pb.EventType) resultVerdict {
	status := x.GetTargetStatus()
	switch {
	case x.GetChannel() == "ssh" || x.GetChannel() == "mcp":
		if status == 0 { // exit status; an upstream's isError
			return spend
		}
		return release
	case status == 0 && t == pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED:
		return spend
	case status >= 200 && status < 300:
		return spend
	case status >= 400 && status < 500:
		return release
	}
	return keepHeld
}

// checkResultStatus refuses a result whose status cannot be the channel's:
// an HTTP target answers 100–599 (a resolution may leave it 0: not seen).
func checkResultStatus(x *pb.Execution, t pb.EventType) error {
	if t != pb.EventType_EVENT_TYPE_RESULT_OBSERVED && t != pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED {
		return nil
	}
	status := x.GetTargetStatus()
	if status == 0 && t == pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED {
		return nil
	}
	if x.GetChannel() == "http" && (status < 100 || status > 599) {
		return fmt.Errorf("%w: target_status %d is not an HTTP status (100-599); an http tool's result needs the status its target answered", ErrInvalid, status)
	}
	if status < 0 {
		return fmt.Errorf("%w: target_status %d is negative", ErrInvalid, status)
	}
	return nil
}

// budgetEffect applies what a transition means for a budget-bound
// execution's hold, before the transition is appended (every call is
// idempotent, so a lost race or a crash repeats it harmlessly). evidence is
// the transition's own (a resolution's "by alice: …"). It returns an error
// that stops the transition.
func (s *Service) budgetEffect(ctx context.Context, x *pb.Execution, t pb.EventType, evidence string) error {
	if x.GetBudgetAccount() == "" {
		return nil
	}
	if s.budget == nil {
		return fmt.Errorf("%w: tool %s is bound to a budget but this gateway has none", ErrInvalid, x.GetTool())
	}
	h := holdOf(x)
	ev := BudgetEvidence{ExecutionID: x.GetExecutionId()}
	switch t {
	case pb.EventType_EVENT_TYPE_DISPATCHED:
		if x.GetBudgetOutcome() == BudgetReleased {
			// A resumed dispatch (after NOT_EXECUTED released the hold) is
			// a new spending attempt: it holds under its own key, derived
			// from the dispatch count so a repeated decision finds it.
			x.BudgetOperationKey = resumedHoldKey(x)
			h = holdOf(x)
		}
		allowed, why, err := s.budget.Hold(ctx, h)
		if err != nil {
			return fmt.Errorf("budget %s: %w", h.Account, err)
		}
		if !allowed {
			return fmt.Errorf("%w: budget %s denies %d: %s", ErrBudgetDenied, h.Account, h.Amount, why)
		}
		x.BudgetOutcome = BudgetHeld
	case pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED:
		ev.TargetStatus = x.GetTargetStatus()
		if t == pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED {
			ev.Note = "resolved completed " + evidence
		}
		switch verdictOf(x, t) {
		case spend:
			if err := s.budget.Settle(ctx, h, ev); err != nil {
				return err
			}
			x.BudgetOutcome = BudgetSpent
		case release:
			if ev.Note == "" {
				ev.Note = "the target refused the request"
			}
			if err := s.budget.Release(ctx, h, ev); err != nil {
				return err
			}
			x.BudgetOutcome = BudgetReleased
		}
	case pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED, pb.EventType_EVENT_TYPE_DENIED:
		if x.GetBudgetOutcome() == BudgetDenied {
			return nil
		}
		ev.Note = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.String(), "EVENT_TYPE_")), "_", " ")
		switch {
		case strings.HasPrefix(evidence, "by "): // a resolution's "by alice: …"
			ev.Note += " " + evidence
		case evidence != "":
			ev.Note += ": " + evidence
		}
		if err := s.budget.Release(ctx, h, ev); err != nil {
			return err
		}
		x.BudgetOutcome = BudgetReleased
	}
	return nil
}
