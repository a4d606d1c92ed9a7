package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// --- approvals ---

type approvalsData struct {
	Items []execView
	More  bool
}

func (c *Console) approvals(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	res, err := c.d.Approvals.ListPending(ctx, connect.NewRequest(&pb.ListPendingRequest{PageSize: maxListed + 1}))
	if err != nil {
		c.readFailed(w, r, s, err)
		return
	}
	xs := res.Msg.GetExecutions()
	d := approvalsData{More: len(xs) > maxListed}
	for _, x := range xs[:min(len(xs), maxListed)] {
		d.Items = append(d.Items, c.view(x))
	}
	p := c.newPage(s, "Pending approvals", "approvals", d)
	p.Live = true
	c.render(w, r, http.StatusOK, "approvals", p)
}

func (c *Console) approve(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	ctx, cancel := c.ctx(r)
	defer cancel()
	back := backTo(r, "/console/approvals")
	_, err := c.d.Approvals.Approve(ctx, connect.NewRequest(&pb.ApproveRequest{ExecutionId: id}))
	if err != nil {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not approved: " + errText(err)})
		return
	}
	c.log.Info("console approve", "execution", id, "by", s.principal.Name)
	c.redirectWith(w, r, s, back, flash{Kind: "ok", Text: "Approved " + id + " as " + s.principal.Name + ". The agent's next call dispatches it, once."})
}

func (c *Console) deny(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	back := backTo(r, "/console/approvals")
	if len(reason) > maxEvidenceBytes {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: fmt.Sprintf("Not denied: the reason is longer than %d bytes.", maxEvidenceBytes)})
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	_, err := c.d.Approvals.Deny(ctx, connect.NewRequest(&pb.ApprovalServiceDenyRequest{ExecutionId: id, Reason: reason}))
	if err != nil {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not denied: " + errText(err)})
		return
	}
	c.log.Info("console deny", "execution", id, "by", s.principal.Name)
	c.redirectWith(w, r, s, back, flash{Kind: "ok", Text: "Denied " + id + " as " + s.principal.Name + "."})
}

// --- executions needing attention ---

type attentionData struct {
	Items      []execView
	Unknown    int
	Review     int
	Overdue    int
	More       bool
	Truncated  bool // more items than are shown with investigations
	Dispatched int  // DISPATCHED executions scanned
}

func (c *Console) attention(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	unknown, _, err := c.list(ctx, pb.State_STATE_OUTCOME_UNKNOWN, maxListed+1)
	if err != nil {
		c.readFailed(w, r, s, err)
		return
	}
	dispatched, _, err := c.list(ctx, pb.State_STATE_DISPATCHED, maxDispatched)
	if err != nil {
		c.readFailed(w, r, s, err)
		return
	}
	d := attentionData{More: len(unknown) > maxListed, Dispatched: len(dispatched)}
	unknown = unknown[:min(len(unknown), maxListed)]
	var items []execView
	for _, x := range unknown {
		v := c.view(x)
		if v.NeedsReview {
			d.Review++
		} else {
			d.Unknown++
		}
		items = append(items, v)
	}
	for _, x := range dispatched {
		if v := c.view(x); v.Overdue {
			d.Overdue++
			items = append(items, v)
		}
	}
	// Needs review first, then other unknown outcomes, then overdue; oldest first within each.
	rank := func(v execView) int {
		switch {
		case v.NeedsReview:
			return 0
		case v.Overdue:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(items, func(a, b execView) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.X.GetExecutionId(), b.X.GetExecutionId())
	})
	for i := range items {
		if i >= maxInvestigated {
			d.Truncated = true
			break
		}
		c.investigate(ctx, &items[i])
	}
	d.Items = items
	p := c.newPage(s, "Executions needing attention", "attention", d)
	p.Live = true
	c.render(w, r, http.StatusOK, "attention", p)
}

func (c *Console) list(ctx context.Context, st pb.State, size int) ([]*pb.Execution, string, error) {
	res, err := c.d.Executions.ListExecutions(ctx, connect.NewRequest(&pb.ListExecutionsRequest{State: st, PageSize: int32(min(size, 1000))}))
	if err != nil {
		return nil, "", err
	}
	return res.Msg.GetExecutions(), res.Msg.GetNextPageToken(), nil
}

// investigate attaches the investigation of v's execution, cached by the
// execution's stream sequence (a new event on it makes a new entry).
func (c *Console) investigate(ctx context.Context, v *execView) {
	key := fmt.Sprintf("%s@%d", v.X.GetExecutionId(), v.X.GetStreamSeq())
	c.invMu.Lock()
	inv, ok := c.inv[key]
	c.invMu.Unlock()
	if !ok {
		var err error
		inv, err = c.d.Investigate(ctx, v.X.GetExecutionId(), "", "")
		if err != nil {
			v.InvErr = errText(err)
			return
		}
		c.invMu.Lock()
		if len(c.inv) >= invCacheMax {
			clear(c.inv)
		}
		c.inv[key] = inv
		c.invMu.Unlock()
	}
	v.Inv = &inv
	v.Gateways = timelineGateways(inv.Timeline)
}

func timelineGateways(steps []audit.Step) []string {
	var gws []string
	for _, s := range steps {
		if !slices.Contains(gws, s.Gateway) {
			gws = append(gws, s.Gateway)
		}
	}
	return gws
}

// --- one execution ---

type executionData struct {
	V execView
}

func (c *Console) execution(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if err := ledger.ValidateExecutionID(id); err != nil {
		c.problem(w, r, s, http.StatusNotFound, "No such execution", errText(err))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	res, err := c.d.Executions.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			c.problem(w, r, s, http.StatusNotFound, "No such execution", "No execution "+id+" is recorded in this ledger.")
			return
		}
		c.readFailed(w, r, s, err)
		return
	}
	v := c.view(res.Msg.GetExecution())
	c.investigate(ctx, &v)
	p := c.newPage(s, "Execution "+id, "find", executionData{V: v})
	p.Live = true
	c.render(w, r, http.StatusOK, "execution", p)
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := backTo(r, "/console/executions/"+id)
	evidence := strings.TrimSpace(r.PostFormValue("evidence"))
	var res pb.Resolution
	switch r.PostFormValue("resolution") {
	case "completed":
		res = pb.Resolution_RESOLUTION_COMPLETED
	case "not_executed":
		res = pb.Resolution_RESOLUTION_NOT_EXECUTED
	default:
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not resolved: choose completed or not executed."})
		return
	}
	if evidence == "" || len(evidence) > maxEvidenceBytes {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: fmt.Sprintf("Not resolved: give the evidence (1 to %d bytes).", maxEvidenceBytes)})
		return
	}
	req := &pb.ResolveRequest{ExecutionId: id, Resolution: res, Evidence: evidence}
	if st := strings.TrimSpace(r.PostFormValue("target_status")); st != "" && res == pb.Resolution_RESOLUTION_COMPLETED {
		n, err := strconv.ParseInt(st, 10, 32)
		if err != nil {
			c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not resolved: the target status must be a number (an HTTP status or exit status)."})
			return
		}
		req.TargetStatus = int32(n)
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if _, err := c.d.Executions.Resolve(ctx, connect.NewRequest(req)); err != nil {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not resolved: " + errText(err)})
		return
	}
	c.log.Info("console resolve", "execution", id, "by", s.principal.Name, "resolution", res)
	c.redirectWith(w, r, s, back, flash{Kind: "ok", Text: fmt.Sprintf("Resolved %s as %s, recorded as %s.", id, resolutionText(res), s.principal.Name)})
}

func resolutionText(r pb.Resolution) string {
	if r == pb.Resolution_RESOLUTION_COMPLETED {
		return "completed"
	}
	return "not executed"
}

// markUnknown records OUTCOME_UNKNOWN for a dispatch past its deadline,
// so the class recovery applies; only an overdue dispatch may be marked.
func (c *Console) markUnknown(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := backTo(r, "/console/executions/"+id)
	ctx, cancel := c.ctx(r)
	defer cancel()
	cur, err := c.d.Executions.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not marked: " + errText(err)})
		return
	}
	if v := c.view(cur.Msg.GetExecution()); !v.Overdue {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not marked: " + id + " is not a dispatch past its deadline."})
		return
	}
	reason := "dispatch deadline passed with no result recorded (marked by " + s.principal.Name + " in the console)"
	if _, err := c.d.Executions.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: reason})); err != nil {
		c.redirectWith(w, r, s, back, flash{Kind: "error", Text: "Not marked: " + errText(err)})
		return
	}
	c.log.Info("console outcome unknown", "execution", id, "by", s.principal.Name)
	c.redirectWith(w, r, s, back, flash{Kind: "ok", Text: "Marked " + id + " OUTCOME_UNKNOWN; resolve it once the target's state is known."})
}

// --- budgets ---

type accountView struct {
	Name      string
	A         *pb.Account
	Holds     []*pb.Hold
	Bar       bar
	Decisions []decisionView
	OverCount int
	Err       string
}

type budgetsData struct {
	Accounts []accountView
	More     bool
}

func (c *Console) budgets(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	names, err := c.d.Accounts(ctx, maxAccounts+1)
	if err != nil {
		c.readFailed(w, r, s, err)
		return
	}
	d := budgetsData{More: len(names) > maxAccounts}
	for _, n := range names[:min(len(names), maxAccounts)] {
		d.Accounts = append(d.Accounts, c.accountView(ctx, n, decisionsShown))
	}
	p := c.newPage(s, "Budget accounts", "budgets", d)
	p.Live = true
	c.render(w, r, http.StatusOK, "budgets", p)
}

func (c *Console) account(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	v := c.accountView(ctx, r.PathValue("account"), decisionsListed)
	if v.A == nil {
		c.problem(w, r, s, http.StatusNotFound, "No such account", v.Err)
		return
	}
	p := c.newPage(s, "Budget account "+v.Name, "budgets", v)
	p.Live = true
	c.render(w, r, http.StatusOK, "account", p)
}

func (c *Console) accountView(ctx context.Context, name string, decisions int) accountView {
	v := accountView{Name: name}
	h, err := c.d.Budget.Keeper.Account(ctx, name)
	if err != nil {
		v.Err = errText(err)
		return v
	}
	v.A = keeper.AccountProto(h.Account)
	for _, x := range h.Account.OpenHolds() {
		v.Holds = append(v.Holds, &pb.Hold{OperationKey: x.OperationKey, RequestDigest: x.RequestDigest, Amount: x.Amount})
	}
	v.Bar = newBar(v.A.GetLimit(), v.A.GetSpent(), v.A.GetHeld())
	// Keeper.Account waited for the views to hold the account's latest
	// event, so the decision list is as fresh as the account.
	ds, _, err := c.d.Budget.Decisions.ListDecisions(ctx, name, 0, decisions)
	if err != nil {
		v.Err = errText(err)
		return v
	}
	for _, d := range ds {
		dv := decisionOf(d)
		if dv.OverLimit {
			v.OverCount++
		}
		v.Decisions = append(v.Decisions, dv)
	}
	return v
}

// --- find ---

type findData struct {
	Query   string
	Kind    string
	Message string
}

// find looks an execution up by id, fingerprint or operation key and
// opens it.
func (c *Console) find(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		c.render(w, r, http.StatusOK, "find", c.newPage(s, "Find an execution", "find", findData{}))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	var id, kind string
	var err error
	switch {
	case strings.HasPrefix(q, "act_"):
		kind = "execution id"
		if _, err = c.d.Executions.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: q})); err == nil {
			id = q
		}
	case strings.HasPrefix(q, "hmac-sha256:"):
		kind = "fingerprint"
		var inv audit.Investigation
		if inv, err = c.d.Investigate(ctx, "", q, ""); err == nil {
			id = inv.ExecutionID
		}
	default:
		kind = "operation key"
		if len(q) > ledger.MaxFieldBytes {
			err = fmt.Errorf("%w: an operation key is at most %d bytes", ledger.ErrInvalid, ledger.MaxFieldBytes)
			break
		}
		var inv audit.Investigation
		if inv, err = c.d.Investigate(ctx, "", "", q); err == nil {
			id = inv.ExecutionID
		}
	}
	if err != nil || id == "" {
		msg := "No execution found with " + kind + " " + q + "."
		if err != nil && !isNotFound(err) {
			msg = "The search failed: " + errText(err)
		}
		c.render(w, r, http.StatusNotFound, "find", c.newPage(s, "Find an execution", "find", findData{Query: q, Kind: kind, Message: msg}))
		return
	}
	http.Redirect(w, r, "/console/executions/"+id, http.StatusSeeOther)
}

func isNotFound(err error) bool {
	return errors.Is(err, ledger.ErrNotFound) || connect.CodeOf(err) == connect.CodeNotFound
}

// --- helpers ---

func (c *Console) readFailed(w http.ResponseWriter, r *http.Request, s *session, err error) {
	c.log.Warn("console read", "path", r.URL.Path, "err", err)
	c.problem(w, r, s, http.StatusServiceUnavailable, "The ledger could not be read", errText(err))
}

// errText is an error as a person reads it (without Connect's code prefix).
func errText(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// backTo is the form's "back" field when it stays in the console.
func backTo(r *http.Request, def string) string {
	if b := r.PostFormValue("back"); b != "" {
		if n := safeNext(b); n != "/console/" {
			return n
		}
	}
	return def
}
