package auth

import (
	"log/slog"
	"net/http"
	"slices"

	"connectrpc.com/connect"
)

// Middleware authenticates requests to routes that are not Connect (the
// console, for one) and lets through only callers holding one of roles
// (any authenticated caller when roles is empty). The handler finds the
// principal with FromContext. A refusal is 401 (with a Bearer challenge) or
// 403, written as a Connect error when the request is a Connect call.
func Middleware(a *Authenticator, roles []Role, lg *slog.Logger, next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := PeerCertificates(r.Context())
		if peer == nil && r.TLS != nil {
			peer = verified(*r.TLS)
		}
		p, err := a.Authenticate(r.Header.Get("Authorization"), peer)
		if err == nil && !p.Local && len(roles) > 0 && !slices.ContainsFunc(roles, p.Has) {
			err = denied(p, "may not open %s (needs role %s)", r.URL.Path, roleList(roles))
		}
		if err != nil {
			lg.Info("http request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			code := codeOf(err)
			if code == connect.CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			}
			if ew.IsSupported(r) {
				_ = ew.Write(w, r, connect.NewError(code, reason(err)))
				return
			}
			status := http.StatusForbidden
			if code == connect.CodeUnauthenticated {
				status = http.StatusUnauthorized
			}
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}
