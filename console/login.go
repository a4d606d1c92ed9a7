package console

import (
	"net/http"
	"strings"
)

type loginData struct {
	Next  string
	Error string
	Note  string
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

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	tok := randomToken()
	http.SetCookie(w, cookie(r, loginCookie, tok, loginCookieMax))
	p := c.newPage(nil, "Sign in", "login", d)
	p.CSRF = tok
	c.render(w, r, status, "login", p)
}

// login checks the caller token and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	lc, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(lc.Value, r.PostFormValue("csrf")) {
		c.renderLogin(w, r, http.StatusForbidden, loginData{Next: next, Error: "The sign-in form expired. Enter your token again."})
		return
	}
	p, ok := c.d.Auth.Authenticate(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr)
		c.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: next, Error: "That token does not belong to a known caller."})
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
