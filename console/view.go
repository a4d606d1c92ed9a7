package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// execView is an execution as the console shows it.
type execView struct {
	X           *pb.Execution
	State       string // "outcome_unknown"
	NeedsReview bool   // irreversible and unknown: a person decides
	Overdue     bool   // DISPATCHED past its deadline, nothing recorded
	Deadline    time.Time
	Record      string // canonical action record, indented
	Arguments   string // its arguments (secrets already digested)
	FirstSent   string // first dispatch time, or why there is none
	NotResent   string // the reason nothing was resent
	Inv         *audit.Investigation
	InvErr      string
	Gateways    []string // gateways on the timeline
}

func (c *Console) view(x *pb.Execution) execView {
	v := execView{X: x, State: stateName(x.GetState())}
	v.NeedsReview = x.GetState() == pb.State_STATE_OUTCOME_UNKNOWN && x.GetRetryClass() == pb.RetryClass_RETRY_CLASS_IRREVERSIBLE
	if x.GetState() == pb.State_STATE_DISPATCHED && x.GetDispatchedAt() != nil {
		// The deadline its DISPATCHED event recorded; for an execution
		// recorded before events carried one, dispatched_at + the tool's
		// timeout + grace, as the ledger computes it.
		ct, _ := c.d.Contracts.Lookup(x.GetTool())
		v.Deadline = ledger.DispatchDeadline(x, ct)
		v.Overdue = !c.now().Before(v.Deadline)
	}
	v.Record = indentJSON(x.GetCanonicalRecord())
	var rec struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal([]byte(x.GetCanonicalRecord()), &rec) == nil && len(rec.Arguments) > 0 {
		v.Arguments = indentJSON(string(rec.Arguments))
	}
	if x.GetDispatchedAt() != nil {
		v.FirstSent = fmtTime(x.GetDispatchedAt())
		if n := x.GetDispatchCount(); n > 1 {
			v.FirstSent += fmt.Sprintf(" (sent %d times, always with Idempotency-Key %s)", n, x.GetExecutionId())
		}
	} else {
		v.FirstSent = "never dispatched"
	}
	v.NotResent = notResent(x, v)
	return v
}

// notResent says, in the recovery table's words, why a retry sent nothing.
func notResent(x *pb.Execution, v execView) string {
	retries := ""
	if n := x.GetAttachCount(); n > 0 {
		retries = fmt.Sprintf("%d retr%s attached to this execution; ", n, map[bool]string{true: "y", false: "ies"}[n == 1])
	}
	switch x.GetState() {
	case pb.State_STATE_AWAITING_APPROVAL:
		return retries + "the tool needs a person's approval for every use: nothing is sent before someone approves, and a retry shows this same approval instead of opening a second one"
	case pb.State_STATE_OUTCOME_UNKNOWN:
		switch x.GetRetryClass() {
		case pb.RetryClass_RETRY_CLASS_IRREVERSIBLE:
			return retries + "irreversible tool with an unknown outcome: blocked for review, nothing is resent until a person resolves it"
		case pb.RetryClass_RETRY_CLASS_STATUS_QUERY:
			return retries + "the outcome is unknown: a retry asks the target's status before anything is resent"
		case pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY:
			return retries + "the outcome is unknown: a retry resends with the same Idempotency-Key, so the target performs it at most once"
		}
		return retries + "the outcome is unknown: nothing was resent"
	case pb.State_STATE_DISPATCHED:
		if v.Overdue {
			return retries + "the dispatch passed its deadline with no result recorded; a retry waits, nothing was resent"
		}
		return retries + "in flight: a retry waits for this dispatch, nothing is resent"
	case pb.State_STATE_DENIED:
		return retries + "denied: a retry gets the original denial"
	case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
		return retries + "the target answered: a retry gets the stored result, nothing is resent"
	}
	return strings.TrimSuffix(retries, "; ")
}

func stateName(s pb.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

func indentJSON(s string) string {
	if s == "" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return b.String()
}

// bar is an account's limit, spent and held as widths in percent (CSS
// classes w-0 … w-100, so no inline style is needed under the CSP).
type bar struct {
	Spent, Held, Free int
	Over              bool // spent + held beyond the limit
	Used              int  // (spent + held) / limit in percent, unclamped
	Limit             int  // where the limit falls on the bar (percent), when over
}

func newBar(limit, spent, held int64) bar {
	total := spent + held
	scale := max(limit, total, 1)
	pct := func(x int64) int { return int((x*100 + scale/2) / scale) }
	b := bar{Spent: pct(spent), Held: pct(held), Over: total > limit}
	b.Spent, b.Held = min(b.Spent, 100), min(b.Held, 100-min(b.Spent, 100))
	b.Free = max(0, 100-b.Spent-b.Held)
	if limit > 0 {
		b.Used = int(total * 100 / limit)
	}
	b.Limit = min(pct(max(limit, 0)), 100)
	return b
}

// decisionView is one budget decision as listed.
type decisionView struct {
	D          *pb.BudgetDecision
	IsDecision bool // a reservation decision (reserved or denied)
	OverLimit  bool // within_limit=false on a decision
	Override   bool
}

func decisionOf(d *pb.BudgetDecision) decisionView {
	v := decisionView{D: d, IsDecision: d.GetOutcome() == "reserved" || d.GetOutcome() == "denied"}
	v.OverLimit = v.IsDecision && !d.GetWithinLimit()
	v.Override = d.GetOverride() != nil && d.GetOverride().GetBy() != ""
	return v
}

// zeroDecimal currencies have no minor unit.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true, "VND": true, "CLP": true, "ISK": true, "HUF": false}

// money renders minor units in the currency's major unit.
func money(minor int64, currency string) string {
	if zeroDecimal[currency] {
		return group(minor) + " " + currency
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return fmt.Sprintf("%s%s.%02d %s", sign, group(minor/100), minor%100, currency)
}

// group writes thousands with thin spaces (50 000).
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format("2006-01-02 15:04:05.000 UTC")
}

var funcs = template.FuncMap{
	"money":    money,
	"ts":       fmtTime,
	"t":        func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"tfull":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
	"state":    stateName,
	"label":    func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", " ")) },
	"class":    func(c pb.RetryClass) string { return strings.ToLower(strings.TrimPrefix(c.String(), "RETRY_CLASS_")) },
	"short":    func(id string) string { return shorten(id, 14) },
	"shortfp":  func(s string) string { return shorten(s, 24) },
	"roles":    rolesText,
	"join":     strings.Join,
	"add":      func(a, b int) int { return a + b },
	"len1":     func(n int) bool { return n == 1 },
	"plural":   func(n int, one, many string) string { return map[bool]string{true: one, false: many}[n == 1] },
	"nonempty": func(s string) bool { return strings.TrimSpace(s) != "" },
	"dict":     dict,
}

// dict builds a template argument from name, value pairs.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

func shorten(s string, n int) string {
	if len(s) <= n+1 {
		return s
	}
	return s[:n] + "…"
}
