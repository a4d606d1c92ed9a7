// Package console serves the operator console at /console on the gateway's
// listener: pending approvals, executions needing attention, budgets and a
// search, as server-rendered HTML (html/template) with embedded CSS and a
// little JavaScript for live updates. It holds no ledger logic: it reads the
// ledger and its views through the gateway's services, in-process, and its
// only state is the sign-in sessions. Any gateway of a shared ledger shows
// the same console.
//
// It must not import NATS or Pebble; server wires it.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/gateway"
)

// Limits of the console.
const (
	maxFormBytes     = 64 << 10 // one form POST
	maxListed        = 200      // executions or approvals shown per list
	maxDispatched    = 1000     // DISPATCHED executions scanned for overdue ones
	maxAccounts      = 200      // budget accounts shown
	decisionsShown   = 10       // decisions per account on the budgets page
	decisionsListed  = 200      // decisions on an account's page
	maxInvestigated  = 50       // attention items shown with their investigation
	invCacheMax      = 512      // cached investigations (by execution and sequence)
	requestWaitMax   = 15 * time.Second
	pollEveryMillis  = 2000
	maxEvidenceBytes = 512
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Deps are what the console reads and acts through. Every field but
// Logger and Now is required.
type Deps struct {
	GatewayID string
	// Auth is the gateway's caller check (the config's callers:); in
	// single-operator mode (Local) the console signs in the local operator.
	Auth       *auth.Authenticator
	Executions *gateway.ExecutionService
	Approvals  *gateway.ApprovalService
	Budget     *gateway.BudgetService
	// Accounts lists budget account names (the views), at most max.
	Accounts func(ctx context.Context, max int) ([]string, error)
	// Investigate reads an intent's events and answers the five questions:
	// by execution id, else fingerprint, else operation key.
	Investigate func(ctx context.Context, executionID, fingerprint, operationKey string) (audit.Investigation, error)
	// Contracts are the tool contracts, for the dispatch deadline of an
	// execution recorded before DISPATCHED events carried one.
	Contracts contract.Book
	Logger    *slog.Logger
	Now       func() time.Time
}

// Console is the /console handler.
type Console struct {
	d        Deps
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	pages    map[string]*template.Template
	assets   fs.FS

	invMu sync.Mutex
	inv   map[string]audit.Investigation // "id@seq" → investigation
}

// New checks deps and parses the templates.
func New(d Deps) (*Console, error) {
	if d.Auth == nil || d.Executions == nil || d.Approvals == nil || d.Budget == nil || d.Accounts == nil || d.Investigate == nil {
		return nil, errors.New("console: missing dependency")
	}
	c := &Console{d: d, log: d.Logger, now: d.Now, inv: map[string]audit.Investigation{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.sessions = newSessions(c.now)
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	c.assets = sub
	c.pages = map[string]*template.Template{}
	for _, p := range []string{"login", "approvals", "attention", "execution", "budgets", "account", "find", "problem"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	return c, nil
}

// Handler serves everything under /console/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/{$}", c.authed(nil, c.home))
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.action(nil, c.logout))
	mux.HandleFunc("GET /console/approvals", c.authed(viewApprovals, c.approvals))
	mux.HandleFunc("POST /console/approvals/{id}/approve", c.action(actApprovals, c.approve))
	mux.HandleFunc("POST /console/approvals/{id}/deny", c.action(actApprovals, c.deny))
	mux.HandleFunc("GET /console/attention", c.authed(viewExecutions, c.attention))
	mux.HandleFunc("GET /console/executions/{id}", c.authed(viewExecutions, c.execution))
	mux.HandleFunc("POST /console/executions/{id}/resolve", c.action(actExecutions, c.resolve))
	mux.HandleFunc("POST /console/executions/{id}/unknown", c.action(actExecutions, c.markUnknown))
	mux.HandleFunc("GET /console/budgets", c.authed(viewBudgets, c.budgets))
	mux.HandleFunc("GET /console/budgets/{account}", c.authed(viewBudgets, c.account))
	mux.HandleFunc("GET /console/find", c.authed(viewExecutions, c.find))
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", http.FileServerFS(c.assets)))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.problem(w, r, nil, http.StatusNotFound, "Not found", "There is no console page at "+r.URL.Path+".")
	})
	return c.secure(mux)
}

// secure sets the headers every console answer carries and refuses
// cross-site form posts before any handler runs.
func (c *Console) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, "/console/assets/") {
			h.Set("Cache-Control", "no-store")
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !sameOrigin(r) {
				c.problem(w, r, nil, http.StatusForbidden, "Cross-site request refused", "This form was posted from another site; nothing was changed.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin accepts a POST whose Origin (when the browser sends one) is
// this host, and whose Sec-Fetch-Site (when sent) is same-origin.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

type handler func(w http.ResponseWriter, r *http.Request, s *session)

// authed runs h for a signed-in caller holding one of roles (nil: any).
// The request's context carries the caller's principal, so the gateway
// services h calls record the signed-in caller as `by` (their author()).
func (c *Console) authed(roles []auth.Role, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.sessions.fromRequest(r)
		if !ok {
			if r.URL.Query().Get("partial") != "" || r.Method != http.MethodGet {
				c.problem(w, r, nil, http.StatusUnauthorized, "Signed out", "Your session ended. Sign in again.")
				return
			}
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if roles != nil && !hasAny(s.principal, roles) {
			c.problem(w, r, s, http.StatusForbidden, "You do not have access to this page",
				fmt.Sprintf("You are signed in as %s (roles: %s). This needs the role %s.", s.principal.Name, rolesText(s.principal.Roles), rolesOr(roles)))
			return
		}
		h(w, r.WithContext(auth.NewContext(r.Context(), s.principal)), s)
	}
}

// action is authed for a form POST that must carry the session's CSRF token.
func (c *Console) action(roles []auth.Role, h handler) http.HandlerFunc {
	return c.authed(roles, func(w http.ResponseWriter, r *http.Request, s *session) {
		if !sameToken(r.PostFormValue("csrf"), s.csrf) {
			c.problem(w, r, s, http.StatusForbidden, "Form expired", "The form did not carry this session's CSRF token; nothing was changed. Reload the page and try again.")
			return
		}
		h(w, r, s)
	})
}

// page is what every template gets.
type page struct {
	Title     string
	Nav       string
	GatewayID string
	Principal *auth.Principal
	CSRF      string
	Flash     flash
	Live      bool
	PollMs    int
	Data      any
}

// Can reports whether the signed-in caller holds any of roles.
func (p page) Can(roles ...auth.Role) bool { return p.Principal != nil && hasAny(p.Principal, roles) }

func (c *Console) newPage(s *session, title, nav string, data any) page {
	p := page{Title: title, Nav: nav, GatewayID: c.d.GatewayID, Data: data, PollMs: pollEveryMillis}
	if s != nil {
		p.Principal, p.CSRF = s.principal, s.csrf
		p.Flash = c.sessions.takeFlash(s)
	}
	return p
}

// render writes a page, or only its live region when the poller asks.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t := c.pages[name]
	root := "layout"
	if r.URL.Query().Get("partial") != "" && t.Lookup("live") != nil {
		root = "live"
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, root, p); err != nil {
		c.log.Error("console render", "page", name, "err", err)
		http.Error(w, "console: page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// problem renders a clear error page (403, 404, 401, failed reads).
func (c *Console) problem(w http.ResponseWriter, r *http.Request, s *session, status int, title, text string) {
	p := page{Title: title, Nav: "problem", GatewayID: c.d.GatewayID, Data: problemData{Status: status, Text: text}}
	if s != nil {
		p.Principal, p.CSRF = s.principal, s.csrf
	}
	if r.URL.Query().Get("partial") != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(text))
		return
	}
	c.render(w, r, status, "problem", p)
}

type problemData struct {
	Status int
	Text   string
}

// home sends the caller to the first page their roles open.
func (c *Console) home(w http.ResponseWriter, r *http.Request, s *session) {
	switch {
	case hasAny(s.principal, viewApprovals):
		http.Redirect(w, r, "/console/approvals", http.StatusSeeOther)
	case hasAny(s.principal, viewBudgets):
		http.Redirect(w, r, "/console/budgets", http.StatusSeeOther)
	default:
		c.problem(w, r, s, http.StatusForbidden, "No console pages for your roles",
			fmt.Sprintf("You are signed in as %s (roles: %s). The console needs approver, analyst, finance or budget_admin.", s.principal.Name, rolesText(s.principal.Roles)))
	}
}

// redirectWith carries a message to the next page.
func (c *Console) redirectWith(w http.ResponseWriter, r *http.Request, s *session, to string, f flash) {
	c.sessions.setFlash(s, f)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestWaitMax)
}
