package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/portcullis-dev/portcullis/auth"
)

type loginData struct {
	Next  string
	Error string
	Note  string
	// Local: the config has no callers, so the only caller is the local
	// operator (Operator), with every role, signed in from this machine.
	Local    bool
	Operator string
}

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/console/"
	}
	return next
}

// loginPage shows the sign-in form. Its CSRF token is a short-lived cookie
// repeated in the form (no session exists yet), so another site cannot
// sign a browser in under someone else's token.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.sessions.fromRequest(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	note := ""
	if r.URL.Query().Get("signed_out") != "" {
		note = "You are signed out."
	}
	c.renderLogin(w, r, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next")), Note: note})
}

// loginFor fills in the sign-in mode of the form.
func (c *Console) loginFor(d loginData) loginData {
	d.Local, d.Operator = c.d.Auth.Local(), auth.LocalOperator
	return d
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	tok := randomToken()
	http.SetCookie(w, cookie(r, loginCookie, tok, loginCookieMax))
	p := c.newPage(nil, "Sign in", "login", c.loginFor(d))
	p.CSRF = tok
	c.render(w, r, status, "login", p)
}

// login checks the caller token (in single-operator mode: that the
// browser is on this machine) and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	lc, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(lc.Value, r.PostFormValue("csrf")) {
		c.renderLogin(w, r, http.StatusForbidden, loginData{Next: next, Error: "The sign-in form expired. Enter your token again."})
		return
	}
	p, ok := c.signIn(r, strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr, "single_operator", c.d.Auth.Local())
		msg := "That token does not belong to a known caller."
		if c.d.Auth.Local() {
			msg = "Without callers, " + auth.LocalOperator + " signs in only from this machine (a loopback address)."
		}
		c.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: next, Error: msg})
		return
	}
	if !hasAny(p, signInRoles) {
		c.log.Info("console sign-in refused: no console role", "caller", p.Name, "roles", p.Roles)
		c.renderLogin(w, r, http.StatusForbidden, loginData{Next: next,
			Error: fmt.Sprintf("You are %s (roles: %s). The console needs the role %s.", p.Name, rolesText(p.Roles), rolesOr(signInRoles))})
		return
	}
	s := c.sessions.create(p)
	c.log.Info("console sign-in", "caller", p.Name, "roles", p.Roles)
	http.SetCookie(w, cookie(r, loginCookie, "", -1))
	http.SetCookie(w, cookie(r, sessionCookie, s.id, sessionLifetimeMax))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(s.id)
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/console/login?signed_out=1", http.StatusSeeOther)
}
