package budget

import (
	"fmt"
	"strings"
)

// Severity ranks a finding.
//
//   - SeverityError: the budget may be wrong or the record cannot be trusted
//     (sums that do not add up, a wrong within_limit flag, a retry counted
//     twice, a stale read that missed a hold and still reserved, an allowed
//     over-limit decision without an override, an event that cannot follow).
//   - SeverityWarning: an exception the record explains but someone should
//     review: a reservation beyond the limit allowed by a named override, or a
//     denial taken on a stale read (it changed nothing).
//   - SeverityInfo: recorded for audit, nothing wrong: a denial beyond the
//     limit.
//
// Every finding is reported; a verifier command that must fail "when
// anything is found" fails on any of them, and one that tolerates denials
// can filter on Severity.
type Severity string

// The severities, from least to most serious.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// The kinds of finding Verify reports.
const (
	// FindingHeldSumMismatch: a decision's held list does not sum to its held
	// total, its held total is not what the account held at the version it
	// read, its held list is not the open holds, or a settlement moves more
	// or less than the hold.
	FindingHeldSumMismatch = "held_sum_mismatch"
	// FindingWithinLimitWrong: within_limit does not match spent + held +
	// amount <= limit as recorded.
	FindingWithinLimitWrong = "within_limit_wrong"
	// FindingOverLimit: a decision beyond the limit, allowed or not (see
	// Severity).
	FindingOverLimit = "over_limit"
	// FindingDoubleCountedRetry: a reservation for an operation key already
	// held or closed, or a second settle/release of a closed operation.
	FindingDoubleCountedRetry = "double_counted_retry"
	// FindingStaleReadMissedHold: a decision read an older account version
	// and its held list lacks a hold open when it was appended (or, with the
	// account as it then stood, it would have been over the limit).
	FindingStaleReadMissedHold = "stale_read_missed_hold"
	// FindingSeenStateMismatch: a decision's spent, limit or limit digest is
	// not what the account had at the version it read.
	FindingSeenStateMismatch = "seen_state_mismatch"
	// FindingInvalidEvent: an event that is malformed or cannot follow
	// (unknown kind, bad fields, version from the future, no limit yet,
	// currency change, settle of an unknown hold).
	FindingInvalidEvent = "invalid_event"
)

// maxMissedListed bounds how many missed operation keys one Detail names.
const maxMissedListed = 10

// Finding is one problem Verify found, tied to the event that shows it.
type Finding struct {
	// Account is the event's account.
	Account string `json:"account"`
	// Index is the event's position in the stream given to Verify.
	Index int `json:"index"`
	// Version is the account version the event was replayed at (the number
	// of the account's events before it in the stream).
	Version uint64 `json:"version"`
	// ReadVersion is the account version the event says it read.
	ReadVersion uint64 `json:"read_version"`
	// OperationKey is the event's operation, if any.
	OperationKey string `json:"operation_key,omitempty"`
	// Kind is one of the Finding* constants.
	Kind string `json:"kind"`
	// Severity ranks the finding.
	Severity Severity `json:"severity"`
	// Detail explains it in words, with the numbers involved.
	Detail string `json:"detail"`
}

// Verify replays a budget stream (all accounts interleaved, in append order)
// and reports, per event, what does not add up. It never stops early: an
// event that Apply would refuse is reported and folded as far as it can be,
// so later events are judged against what the stream says. A stream built
// only from this package's decision functions and Apply yields no findings
// other than over_limit ones (info for denials, warning for overrides).
func Verify(events []Event) []Finding {
	v := verifier{accounts: map[string]*replayed{}}
	for i, e := range events {
		v.replay(i, e)
	}
	return v.findings
}

type verifier struct {
	accounts map[string]*replayed
	findings []Finding
}

// replayed is an account as the stream builds it, with the totals it had at
// every version so a stale decision can be compared with what it read.
type replayed struct {
	acct    Account
	history []snapshot // history[v] is the account after v events
}

type snapshot struct {
	spent, held, limit int64
	limitDigest        string
}

type reporter func(kind string, sev Severity, format string, args ...any)

func (v *verifier) replay(i int, e Event) {
	r := v.accounts[e.Account]
	if r == nil {
		r = &replayed{history: []snapshot{{}}}
		v.accounts[e.Account] = r
	}
	a := &r.acct
	report := func(kind string, sev Severity, format string, args ...any) {
		v.findings = append(v.findings, Finding{
			Account: e.Account, Index: i, Version: a.Version, ReadVersion: e.AccountVersion,
			OperationKey: e.OperationKey, Kind: kind, Severity: sev, Detail: fmt.Sprintf(format, args...),
		})
	}
	r.check(e, report)
	a.Version++
	r.history = append(r.history, snapshot{spent: a.Spent, held: a.Held, limit: a.Limit, limitDigest: a.LimitDigest})
}

func (r *replayed) check(e Event, report reporter) {
	a := &r.acct
	if err := e.checkShape(); err != nil {
		report(FindingInvalidEvent, SeverityError, "%s", detail(err))
		return
	}
	if e.AccountVersion > a.Version {
		report(FindingInvalidEvent, SeverityError, "read version %d, but only %d events of the account precede it", e.AccountVersion, a.Version)
	}
	if a.Version == 0 && e.Kind != LimitSet {
		report(FindingInvalidEvent, SeverityError, "%s before the account's first limit_set", e.Kind)
	}
	if a.Version > 0 && e.Currency != a.Currency {
		report(FindingInvalidEvent, SeverityError, "currency %q, account is in %q", e.Currency, a.Currency)
		return
	}
	switch e.Kind {
	case LimitSet:
		if err := e.checkLimitSet(); err != nil {
			report(FindingInvalidEvent, SeverityError, "%s", detail(err))
			return
		}
		a.setLimit(*e.LimitRecord, e.LimitDigest)
	case Reserved, Denied:
		r.decision(e, report)
	case Settled, Released:
		r.closing(e, report)
	}
}

func (r *replayed) decision(e Event, report reporter) {
	a := &r.acct
	fieldsOK := true
	if err := e.checkDecisionFields(); err != nil {
		report(FindingInvalidEvent, SeverityError, "%s", detail(err))
		fieldsOK = false
	}
	if err := e.checkHeldSum(); err != nil {
		report(FindingHeldSumMismatch, SeverityError, "%s", detail(err))
	}
	within := withinLimit(e.SpentSeen, e.HeldSeen, e.Amount, e.Limit)
	if err := e.checkWithinLimit(); err != nil {
		report(FindingWithinLimitWrong, SeverityError, "%s", detail(err))
	}
	overrideMissing := e.Kind == Reserved && !e.WithinLimit && e.Override == nil
	if !within {
		arith := fmt.Sprintf("spent %d + held %d + amount %d is over limit %d", e.SpentSeen, e.HeldSeen, e.Amount, e.Limit)
		switch {
		case e.Kind == Denied:
			report(FindingOverLimit, SeverityInfo, "denied: %s (allowed=false)", arith)
		case e.Override != nil:
			report(FindingOverLimit, SeverityWarning, "allowed by override of %q (%q): %s (allowed=true)", e.Override.By, e.Override.Reason, arith)
		default:
			report(FindingOverLimit, SeverityError, "allowed without an override: %s (allowed=true)", arith)
			overrideMissing = true
		}
	}
	if err := e.checkAllowed(); err != nil && !overrideMissing {
		report(FindingInvalidEvent, SeverityError, "%s", detail(err))
	}

	if e.AccountVersion <= a.Version {
		s := r.history[e.AccountVersion]
		if s.held != e.HeldSeen {
			report(FindingHeldSumMismatch, SeverityError, "held total seen %d, the account held %d at version %d", e.HeldSeen, s.held, e.AccountVersion)
		} else if e.AccountVersion == a.Version && !a.HoldsAre(e.HeldListSeen) {
			report(FindingHeldSumMismatch, SeverityError, "held list seen is not the account's open holds at version %d", e.AccountVersion)
		}
		if s.spent != e.SpentSeen || s.limit != e.Limit || s.limitDigest != e.LimitDigest {
			report(FindingSeenStateMismatch, SeverityError, "saw spent %d, limit %d (%s); the account had spent %d, limit %d (%s) at version %d",
				e.SpentSeen, e.Limit, e.LimitDigest, s.spent, s.limit, s.limitDigest, e.AccountVersion)
		}
	}
	if e.AccountVersion < a.Version {
		r.staleRead(e, report)
	}

	if h, held := a.Holds[e.OperationKey]; held {
		if e.Kind == Reserved {
			report(FindingDoubleCountedRetry, SeverityError, "operation already holds %d (request %s); this reservation counts it again", h.Amount, h.RequestDigest)
		} else {
			report(FindingInvalidEvent, SeverityError, "denied an operation that holds %d: a retry must return the hold", h.Amount)
		}
		return
	}
	if c, closed := a.Closed[e.OperationKey]; closed {
		if e.Kind == Reserved {
			report(FindingDoubleCountedRetry, SeverityError, "operation already %s at version %d; this reservation counts it again", c.State, c.Version)
		} else {
			report(FindingInvalidEvent, SeverityError, "denied an operation already %s at version %d", c.State, c.Version)
		}
		return
	}
	if e.Kind == Reserved && fieldsOK {
		held, ok := addChecked(a.Held, e.Amount)
		if !ok {
			report(FindingInvalidEvent, SeverityError, "held total %d + amount %d overflows", a.Held, e.Amount)
			return
		}
		a.openHold(Hold{OperationKey: e.OperationKey, RequestDigest: e.RequestDigest, Amount: e.Amount}, held)
	}
}

// staleRead checks a decision that read an older version than the stream
// gives it: did it miss a hold that is open now?
func (r *replayed) staleRead(e Event, report reporter) {
	a := &r.acct
	seen := make(map[string]bool, len(e.HeldListSeen))
	for _, h := range e.HeldListSeen {
		seen[h.OperationKey] = true
	}
	var missed []string
	for _, h := range a.OpenHolds() {
		if !seen[h.OperationKey] {
			missed = append(missed, fmt.Sprintf("%s (%d)", h.OperationKey, h.Amount))
		}
	}
	sev := SeverityError
	if e.Kind == Denied {
		sev = SeverityWarning
	}
	if len(missed) > 0 {
		listed := missed
		more := ""
		if len(listed) > maxMissedListed {
			listed, more = listed[:maxMissedListed], fmt.Sprintf(" and %d more", len(missed)-maxMissedListed)
		}
		report(FindingStaleReadMissedHold, sev, "read version %d, appended at version %d; missed open holds %s%s",
			e.AccountVersion, a.Version, strings.Join(listed, ", "), more)
		return
	}
	if e.Kind == Reserved && e.WithinLimit && !withinLimit(a.Spent, a.Held, e.Amount, a.Limit) {
		report(FindingStaleReadMissedHold, sev, "read version %d, appended at version %d; against spent %d + held %d and limit %d it is over the limit",
			e.AccountVersion, a.Version, a.Spent, a.Held, a.Limit)
	}
}

func (r *replayed) closing(e Event, report reporter) {
	a := &r.acct
	if err := e.checkCloseFields(); err != nil {
		report(FindingInvalidEvent, SeverityError, "%s", detail(err))
		return
	}
	h, open := a.Holds[e.OperationKey]
	if !open {
		if c, closed := a.Closed[e.OperationKey]; closed {
			report(FindingDoubleCountedRetry, SeverityError, "operation already %s at version %d; this %s counts it again", c.State, c.Version, e.Kind)
		} else {
			report(FindingInvalidEvent, SeverityError, "%s of an operation with no open hold", e.Kind)
		}
		return
	}
	if h.RequestDigest != e.RequestDigest {
		report(FindingInvalidEvent, SeverityError, "hold is for request %s, event names %s", h.RequestDigest, e.RequestDigest)
		return
	}
	if len(e.HeldListSeen) > 0 && e.AccountVersion <= a.Version { // records before 2026-12-05 carry none
		s := r.history[e.AccountVersion]
		switch {
		case s.held != e.HeldSeen:
			report(FindingHeldSumMismatch, SeverityError, "held total seen %d, the account held %d at version %d", e.HeldSeen, s.held, e.AccountVersion)
		case e.AccountVersion == a.Version && !a.HoldsAre(e.HeldListSeen):
			report(FindingHeldSumMismatch, SeverityError, "held list seen is not the account's open holds at version %d", e.AccountVersion)
		}
		if s.spent != e.SpentSeen {
			report(FindingSeenStateMismatch, SeverityError, "saw spent %d; the account had spent %d at version %d", e.SpentSeen, s.spent, e.AccountVersion)
		}
	}
	spent, released, state := e.Amount, e.Remainder, HoldSpent
	if e.Kind == Released {
		spent, released, state = 0, e.Amount, HoldReleased
	}
	if spent+released != h.Amount {
		report(FindingHeldSumMismatch, SeverityError, "moves %d spent + %d released, but %d was held", spent, released, h.Amount)
	}
	newSpent, ok := addChecked(a.Spent, spent)
	if !ok {
		report(FindingInvalidEvent, SeverityError, "spent total %d + %d overflows", a.Spent, spent)
		return
	}
	a.closeHold(h, state, spent, released, *e.Evidence, newSpent)
}

// detail is an error's message without the trailing sentinel.
func detail(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+ErrInvalidEvent.Error())
}
