package auth

import (
	"crypto/x509"
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
		p, err := a.Authenticate(r.Header.Get("Authorization"), requestCertificates(r))
		if err == nil && !p.Local && len(roles) > 0 && !slices.ContainsFunc(roles, p.Has) {
			err = denied(p, "may not open %s (needs role %s)", r.URL.Path, roleList(roles))
		}
		if err != nil {
			refuse(w, r, ew, lg, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

// Optional is Middleware for a route that also answers callers who send
// no credentials (/metrics): such a request goes through without a
// principal (the local operator's, without callers:), and the handler
// decides what it shows. Credentials that are sent must authenticate: a
// wrong token is refused with 401, as on every other route, so a scraper
// configured with a stale token learns it instead of silently seeing less.
func Optional(a *Authenticator, lg *slog.Logger, next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header, certs := r.Header.Get("Authorization"), requestCertificates(r)
		if header == "" && len(certs) == 0 && !a.Local() {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.Authenticate(header, certs)
		if err != nil {
			refuse(w, r, ew, lg, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

// requestCertificates is the request's verified client certificate chain,
// or nil.
func requestCertificates(r *http.Request) []*x509.Certificate {
	if peer := PeerCertificates(r.Context()); peer != nil {
		return peer
	}
	if r.TLS != nil {
		return verified(*r.TLS)
	}
	return nil
}

// refuse answers a request that err refused: 401 (with a Bearer challenge)
// or 403, as a Connect error when the request is a Connect call.
func refuse(w http.ResponseWriter, r *http.Request, ew *connect.ErrorWriter, lg *slog.Logger, err error) {
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
}
