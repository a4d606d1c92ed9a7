package console

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/portcullis-dev/portcullis/auth"
)

// Who may see and do what. The console calls the gateway's services in
// process, so the Connect interceptor does not run for it: these lists are
// the console's own check, made before any service is called.
var (
	viewApprovals  = []auth.Role{auth.Approver, auth.Analyst}
	actApprovals   = []auth.Role{auth.Approver}
	viewExecutions = []auth.Role{auth.Analyst, auth.Approver}
	actExecutions  = []auth.Role{auth.Approver}
	viewBudgets    = []auth.Role{auth.Finance, auth.BudgetAdmin}
	// signInRoles: a caller holding none of them has no page to see, so it
	// is refused at the sign-in (an executor, say), not on every page.
	signInRoles = []auth.Role{auth.Approver, auth.Analyst, auth.Finance, auth.BudgetAdmin}
)

// hasAny reports whether p holds one of roles (the local operator holds
// every role).
func hasAny(p *auth.Principal, roles []auth.Role) bool {
	return slices.ContainsFunc(roles, p.Has)
}

// rolesText lists roles for a person ("none" for none).
func rolesText(roles []auth.Role) string {
	if len(roles) == 0 {
		return "none"
	}
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// rolesOr lists roles as alternatives ("approver or analyst").
func rolesOr(roles []auth.Role) string {
	return strings.ReplaceAll(rolesText(roles), ", ", " or ")
}

// signIn authenticates a sign-in form: in single-operator mode (no callers
// in the config) the local operator, from a loopback address only; else
// the caller whose token this is, checked by the gateway's Authenticator
// against the configured SHA-256 digests. The token is not kept.
func (c *Console) signIn(r *http.Request, token string) (*auth.Principal, bool) {
	if c.d.Auth.Local() {
		if !loopbackRemote(r.RemoteAddr) {
			return nil, false
		}
		p, err := c.d.Auth.Authenticate("", nil)
		return p, err == nil
	}
	if token == "" {
		return nil, false
	}
	p, err := c.d.Auth.Authenticate("Bearer "+token, nil)
	return p, err == nil
}

// loopbackRemote reports whether a request's RemoteAddr is on this machine.
func loopbackRemote(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
