package budget

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// EventKind names what an event records.
type EventKind string

// The kinds of budget events. Reserved and Denied are decisions: they record
// everything the decision saw. Settled and Released are the only events that
// move a hold.
const (
	// LimitSet creates the account or replaces its limit (same currency).
	LimitSet EventKind = "limit_set"
	// Reserved opens a hold: within the limit, or over it by an override.
	Reserved EventKind = "reserved"
	// Denied records a refused reservation; it opens no hold.
	Denied EventKind = "denied"
	// Settled moves a hold to spent (effect confirmed); settling for less
	// releases the remainder.
	Settled EventKind = "settled"
	// Released ends a hold without spending (absence of the effect proven).
	Released EventKind = "released"
)

// Hold is one open reservation: the operation it belongs to, the digest of
// the request that opened it, and the amount held in minor units.
type Hold struct {
	OperationKey  string `json:"operation_key"`
	RequestDigest string `json:"request_digest"`
	Amount        int64  `json:"amount"`
}

// Override records who allowed a reservation beyond the limit, and why. The
// decision still says within_limit=false.
type Override struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// Evidence is what justifies moving a hold: the execution, the status the
// target answered, and a note on anything else that shows it (a status
// endpoint's answer, a marker, a person's check). A settlement must name the
// execution; every settlement and release needs a status or a note.
type Evidence struct {
	ExecutionID string `json:"execution_id,omitempty"`
	// TargetStatus is the HTTP status (100–599) or exit status the target
	// answered; 0 when none was observed.
	TargetStatus int32  `json:"target_status,omitempty"`
	Note         string `json:"note,omitempty"`
}

// UnmarshalJSON reads evidence, also as exported before 2026-12-05, when
// target_status was text: a number in it ("201") becomes the status, any
// other text ("target answered 502") the start of the note.
func (v *Evidence) UnmarshalJSON(data []byte) error {
	type plain Evidence
	var cur plain
	if err := json.Unmarshal(data, &cur); err == nil {
		*v = Evidence(cur)
		return nil
	}
	var old struct {
		ExecutionID  string `json:"execution_id"`
		TargetStatus string `json:"target_status"`
		Note         string `json:"note"`
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return err
	}
	*v = Evidence{ExecutionID: old.ExecutionID, Note: old.Note}
	v.TargetStatus, v.Note = LegacyStatus(old.TargetStatus, old.Note)
	return nil
}

// LegacyStatus reads a target status written as text before 2026-12-05: a
// number becomes the status; other text is put before the note.
func LegacyStatus(text, note string) (int32, string) {
	if n, err := strconv.ParseInt(text, 10, 32); err == nil && n >= 0 && n <= MaxTargetStatus {
		return int32(n), note
	}
	switch {
	case text == "":
		return 0, note
	case note == "":
		return 0, text
	}
	return 0, text + "; " + note
}

// MaxTargetStatus bounds Evidence.TargetStatus (HTTP statuses end at 599,
// exit statuses at 255).
const MaxTargetStatus = 999

// ReasonLimitNotValid is a Denied event's Reason when the limit was not in
// force at the decision (before its valid_from, at or after its valid_until).
const ReasonLimitNotValid = "limit_not_valid"

// Event is one record on an account's subject. Fields not used by its Kind
// are zero:
//
//   - all kinds: Kind, Account, AccountVersion, At, Currency;
//   - LimitSet: LimitRecord, Limit, LimitDigest;
//   - Reserved, Denied: OperationKey, RequestDigest, Amount, Limit,
//     LimitDigest, SpentSeen, HeldSeen, HeldListSeen, WithinLimit, Allowed,
//     Override (Reserved beyond the limit only), Reason (Denied only, when
//     the limit was not in force);
//   - Settled: OperationKey, RequestDigest, Amount (spent), Remainder
//     (released back), Evidence, and what it read: SpentSeen, HeldSeen,
//     HeldListSeen (the closed hold included; absent on events written
//     before 2026-12-05);
//   - Released: OperationKey, RequestDigest, Amount (released), Evidence,
//     SpentSeen, HeldSeen, HeldListSeen as for Settled.
type Event struct {
	// Kind says what the event records.
	Kind EventKind `json:"kind"`
	// Account names the account (and so the subject) the event belongs to.
	Account string `json:"account"`
	// AccountVersion is the account version the decision read: the number
	// of the account's events before this one. It is the expected version
	// for the compare-and-set append; the event becomes version+1.
	AccountVersion uint64 `json:"account_version"`
	// At is when the decision was taken (UTC).
	At time.Time `json:"at,omitzero"`
	// Currency is the unit of every amount in the event.
	Currency string `json:"currency,omitempty"`

	// LimitRecord is the new limit (LimitSet only).
	LimitRecord *Limit `json:"limit_record,omitempty"`
	// Limit is the limit in force (LimitSet: set; decisions: seen).
	Limit int64 `json:"limit"`
	// LimitDigest is the digest of the limit record in force.
	LimitDigest string `json:"limit_digest,omitempty"`

	// OperationKey identifies the intended operation; retries keep it.
	OperationKey string `json:"operation_key,omitempty"`
	// RequestDigest is the digest of the request content.
	RequestDigest string `json:"request_digest,omitempty"`
	// Amount is requested (decisions), spent (Settled) or released
	// (Released), in minor units.
	Amount int64 `json:"amount,omitempty"`

	// SpentSeen is the account's spent total the decision read.
	SpentSeen int64 `json:"spent_seen"`
	// HeldSeen is the account's held total the decision read.
	HeldSeen int64 `json:"held_seen"`
	// HeldListSeen is every open hold the decision read, sorted by
	// operation key; its amounts sum to HeldSeen.
	HeldListSeen []Hold `json:"held_list_seen,omitempty"`
	// WithinLimit is SpentSeen + HeldSeen + Amount <= Limit.
	WithinLimit bool `json:"within_limit"`
	// Allowed says whether a hold was opened (true for Reserved).
	Allowed bool `json:"allowed"`
	// Override is who allowed a reservation beyond the limit and why.
	Override *Override `json:"override,omitempty"`
	// Reason says why a denial was not about the arithmetic:
	// ReasonLimitNotValid, or empty for a denial beyond the limit.
	Reason string `json:"reason,omitempty"`

	// Evidence justifies Settled and Released.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Remainder is the part of the hold a settlement for less released.
	Remainder int64 `json:"remainder,omitempty"`
}

// IsDecision reports whether the event is a reservation decision (Reserved
// or Denied).
func (e Event) IsDecision() bool { return e.Kind == Reserved || e.Kind == Denied }

// Validate checks an event on its own, without the account: required fields
// for its kind, bounds, positive amounts, the held list summing to HeldSeen,
// WithinLimit matching the arithmetic, and Allowed/Override matching the
// kind. Call it before appending; Apply calls it again after reading. Errors
// wrap ErrInvalidEvent.
func (e Event) Validate() error {
	if err := e.checkShape(); err != nil {
		return err
	}
	var err error
	switch e.Kind {
	case LimitSet:
		err = e.checkLimitSet()
	case Reserved, Denied:
		if err = e.checkDecisionFields(); err == nil {
			if err = e.checkHeldSum(); err == nil {
				if err = e.checkWithinLimit(); err == nil {
					err = e.checkAllowed()
				}
			}
		}
	case Settled, Released:
		err = e.checkCloseFields()
	}
	return err
}

// invalidEvent formats an error wrapping ErrInvalidEvent (and any error the
// format itself wraps with %w).
func invalidEvent(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalidEvent)...)
}

// checkShape checks what any reader needs before looking further: a known
// kind, an account name, and every string and list within its bound. It is
// all DecodeEvent requires.
func (e Event) checkShape() error {
	switch e.Kind {
	case LimitSet, Reserved, Denied, Settled, Released:
	default:
		return invalidEvent("unknown kind %q", e.Kind)
	}
	if err := checkIdent("account", e.Account); err != nil {
		return invalidEvent("%s", err)
	}
	for _, f := range []struct {
		name string
		s    string
		max  int
	}{
		{"currency", e.Currency, MaxKeyBytes},
		{"limit_digest", e.LimitDigest, MaxKeyBytes},
		{"operation_key", e.OperationKey, MaxKeyBytes},
		{"request_digest", e.RequestDigest, MaxKeyBytes},
	} {
		if len(f.s) > f.max {
			return invalidEvent("%s is %d bytes, more than %d", f.name, len(f.s), f.max)
		}
	}
	if len(e.HeldListSeen) > MaxOpenHolds {
		return invalidEvent("held list has %d holds, more than %d", len(e.HeldListSeen), MaxOpenHolds)
	}
	for _, h := range e.HeldListSeen {
		if len(h.OperationKey) > MaxKeyBytes || len(h.RequestDigest) > MaxKeyBytes {
			return invalidEvent("held list entry longer than %d bytes", MaxKeyBytes)
		}
	}
	if l := e.LimitRecord; l != nil && (len(l.Account) > MaxKeyBytes || len(l.Currency) > MaxKeyBytes || len(l.Delegator) > MaxKeyBytes) {
		return invalidEvent("limit record field longer than %d bytes", MaxKeyBytes)
	}
	if o := e.Override; o != nil && (len(o.By) > MaxKeyBytes || len(o.Reason) > MaxTextBytes) {
		return invalidEvent("override longer than its bounds")
	}
	if v := e.Evidence; v != nil && (len(v.ExecutionID) > MaxKeyBytes || len(v.Note) > MaxTextBytes) {
		return invalidEvent("evidence longer than its bounds")
	}
	return nil
}

// checkUnused reports a field set that the event's kind does not use.
func (e Event) checkUnused() error {
	decision := e.IsDecision()
	closing := e.Kind == Settled || e.Kind == Released
	switch {
	case e.Kind != LimitSet && e.LimitRecord != nil:
		return invalidEvent("%s event carries a limit record", e.Kind)
	case !decision && (e.WithinLimit || e.Allowed || e.Override != nil):
		return invalidEvent("%s event carries decision fields", e.Kind)
	case !decision && !closing && (e.SpentSeen != 0 || e.HeldSeen != 0 || len(e.HeldListSeen) != 0):
		return invalidEvent("%s event carries what a decision saw", e.Kind)
	case e.Reason != "" && (e.Kind != Denied || e.Reason != ReasonLimitNotValid):
		return invalidEvent("%s event with reason %q", e.Kind, e.Reason)
	case !closing && (e.Evidence != nil || e.Remainder != 0):
		return invalidEvent("%s event carries settlement fields", e.Kind)
	case closing && (e.Limit != 0 || e.LimitDigest != ""):
		return invalidEvent("%s event carries limit fields", e.Kind)
	case e.Kind == LimitSet && (e.OperationKey != "" || e.RequestDigest != "" || e.Amount != 0):
		return invalidEvent("limit_set event carries operation fields")
	case e.Kind == Released && e.Remainder != 0:
		return invalidEvent("released event carries a remainder")
	}
	return nil
}

func (e Event) checkLimitSet() error {
	if err := e.checkUnused(); err != nil {
		return err
	}
	l := e.LimitRecord
	if l == nil {
		return invalidEvent("limit_set event without a limit record")
	}
	if err := l.Validate(); err != nil {
		return invalidEvent("%s", err)
	}
	if l.Account != e.Account || l.Currency != e.Currency || l.Limit != e.Limit {
		return invalidEvent("limit record does not match the event's account, currency or limit")
	}
	if d := l.Digest(); d != e.LimitDigest {
		return invalidEvent("limit digest %q is not the record's digest %q", e.LimitDigest, d)
	}
	return nil
}

// checkOperation checks the operation key, request digest and amount.
func (e Event) checkOperation() error {
	if e.OperationKey == "" {
		return invalidEvent("%s", ErrMissingKey)
	}
	if err := checkIdent("operation_key", e.OperationKey); err != nil {
		return invalidEvent("%s", err)
	}
	if err := checkIdent("request_digest", e.RequestDigest); err != nil {
		return invalidEvent("%s", err)
	}
	if err := checkAmount("amount", e.Amount); err != nil {
		return invalidEvent("%s", err)
	}
	return checkCurrencyField(e.Currency)
}

func checkCurrencyField(c string) error {
	if err := checkCurrency(c); err != nil {
		return invalidEvent("%s", err)
	}
	return nil
}

// checkDecisionFields checks a decision's fields one by one (not how they
// relate: see checkHeldSum, checkWithinLimit, checkAllowed).
func (e Event) checkDecisionFields() error {
	if err := e.checkUnused(); err != nil {
		return err
	}
	if err := e.checkOperation(); err != nil {
		return err
	}
	if e.Limit < 0 || e.Limit > MaxAmount {
		return invalidEvent("limit %d is not in 0..%d", e.Limit, MaxAmount)
	}
	if err := checkIdent("limit_digest", e.LimitDigest); err != nil {
		return invalidEvent("%s", err)
	}
	if err := e.checkSeenFields(); err != nil {
		return err
	}
	if o := e.Override; o != nil {
		if err := o.validate(); err != nil {
			return invalidEvent("%s", err)
		}
	}
	return nil
}

// checkSeenFields checks what a record says it read: spent and held not
// negative, the held list well formed and sorted. A decision's own
// operation is never in it; a settlement's or release's always is (when the
// record carries a list at all: those written before 2026-12-05 do not).
func (e Event) checkSeenFields() error {
	if e.SpentSeen < 0 || e.HeldSeen < 0 {
		return invalidEvent("negative spent (%d) or held (%d) seen", e.SpentSeen, e.HeldSeen)
	}
	own := false
	for i, h := range e.HeldListSeen {
		if err := checkIdent("held operation_key", h.OperationKey); err != nil {
			return invalidEvent("held list: %s", err)
		}
		if err := checkIdent("held request_digest", h.RequestDigest); err != nil {
			return invalidEvent("held list: %s", err)
		}
		if err := checkAmount("held amount", h.Amount); err != nil {
			return invalidEvent("held list %q: %s", h.OperationKey, err)
		}
		if i > 0 && e.HeldListSeen[i-1].OperationKey >= h.OperationKey {
			return invalidEvent("held list not sorted by operation key or has duplicates at %q", h.OperationKey)
		}
		own = own || h.OperationKey == e.OperationKey
	}
	switch {
	case e.IsDecision() && own:
		return invalidEvent("operation key %q is already in the held list the decision saw", e.OperationKey)
	case !e.IsDecision() && len(e.HeldListSeen) > 0 && !own:
		return invalidEvent("%s of %q, which is not in the held list it saw", e.Kind, e.OperationKey)
	case !e.IsDecision() && len(e.HeldListSeen) == 0 && (e.SpentSeen != 0 || e.HeldSeen != 0):
		return invalidEvent("%s saw spent %d and held %d but no held list", e.Kind, e.SpentSeen, e.HeldSeen)
	}
	return nil
}

// checkHeldSum checks that the held list sums to the held total seen.
func (e Event) checkHeldSum() error {
	sum, ok := sumHolds(e.HeldListSeen)
	if !ok {
		return invalidEvent("held list sum overflows")
	}
	if sum != e.HeldSeen {
		return invalidEvent("held list sums to %d, held total seen is %d", sum, e.HeldSeen)
	}
	return nil
}

// checkWithinLimit checks WithinLimit against the recorded arithmetic.
func (e Event) checkWithinLimit() error {
	if w := withinLimit(e.SpentSeen, e.HeldSeen, e.Amount, e.Limit); w != e.WithinLimit {
		return invalidEvent("within_limit=%t, but spent %d + held %d + amount %d against limit %d gives %t",
			e.WithinLimit, e.SpentSeen, e.HeldSeen, e.Amount, e.Limit, w)
	}
	return nil
}

// checkAllowed checks that the kind, Allowed, WithinLimit and Override
// agree: a reservation within the limit carries no override; one beyond it
// must carry one; a denial is never within the limit and never allowed.
func (e Event) checkAllowed() error {
	switch {
	case e.Kind == Reserved && !e.Allowed:
		return invalidEvent("reserved but allowed=false")
	case e.Kind == Denied && e.Allowed:
		return invalidEvent("denied but allowed=true")
	case e.Kind == Denied && e.Override != nil:
		return invalidEvent("denied with an override")
	case e.Kind == Denied && e.WithinLimit && e.Reason != ReasonLimitNotValid:
		return invalidEvent("denied although within the limit")
	case e.Kind == Reserved && e.WithinLimit && e.Override != nil:
		return invalidEvent("override recorded on a reservation within the limit")
	case e.Kind == Reserved && !e.WithinLimit && e.Override == nil:
		return invalidEvent("reserved beyond the limit without an override")
	}
	return nil
}

func (e Event) checkCloseFields() error {
	if err := e.checkUnused(); err != nil {
		return err
	}
	if err := e.checkOperation(); err != nil {
		return err
	}
	if e.Remainder < 0 || e.Remainder > MaxAmount {
		return invalidEvent("remainder %d is not in 0..%d", e.Remainder, MaxAmount)
	}
	if e.Amount+e.Remainder > MaxAmount { // both <= MaxAmount: no overflow
		return invalidEvent("amount %d + remainder %d is more than %d", e.Amount, e.Remainder, MaxAmount)
	}
	if err := e.checkSeenFields(); err != nil {
		return err
	}
	if err := e.checkHeldSum(); err != nil {
		return err
	}
	if e.Evidence == nil {
		return invalidEvent("%s event without evidence", e.Kind)
	}
	if err := e.Evidence.validate(e.Kind == Settled); err != nil {
		return invalidEvent("%s", err)
	}
	return nil
}

func (o Override) validate() error {
	if err := checkIdent("override by", o.By); err != nil {
		return err
	}
	return checkText("override reason", o.Reason, true)
}

func (v Evidence) validate(needExecution bool) error {
	if needExecution || v.ExecutionID != "" {
		if err := checkIdent("evidence execution_id", v.ExecutionID); err != nil {
			return err
		}
	}
	if v.TargetStatus < 0 || v.TargetStatus > MaxTargetStatus {
		return fmt.Errorf("evidence target_status %d is not a status (1..%d)", v.TargetStatus, MaxTargetStatus)
	}
	if v.TargetStatus == 0 && v.Note == "" {
		return fmt.Errorf("evidence needs the target status or a note on what shows the outcome")
	}
	return checkText("evidence note", v.Note, false)
}

// sortedHolds returns the holds sorted by operation key, nil when empty.
func sortedHolds(m map[string]Hold) []Hold {
	if len(m) == 0 {
		return nil
	}
	hs := make([]Hold, 0, len(m))
	for _, h := range m {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b Hold) int {
		switch {
		case a.OperationKey < b.OperationKey:
			return -1
		case a.OperationKey > b.OperationKey:
			return 1
		}
		return 0
	})
	return hs
}
