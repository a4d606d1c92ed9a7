package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// wwwAuthenticate is the challenge sent with every unauthenticated answer.
const wwwAuthenticate = `Bearer realm="portcullis"`

// NewInterceptor returns the Connect interceptor that authenticates every
// call and applies pol before the handler runs, so a refused call appends
// nothing. The handler finds the principal with FromContext.
func NewInterceptor(a *Authenticator, pol Policy, lg *slog.Logger) connect.Interceptor {
	return &interceptor{a: a, pol: pol, log: lg}
}

type interceptor struct {
	a   *Authenticator
	pol Policy
	log *slog.Logger
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		procedure := req.Spec().Procedure
		p, err := i.authorize(ctx, req.Header(), procedure, req.Any(), req.Peer().Addr)
		if err != nil {
			return nil, err
		}
		res, err := next(NewContext(ctx, p), req)
		if err != nil {
			return res, err
		}
		if err := i.pol.CheckResponse(p, procedure, res.Any()); err != nil {
			i.log.Warn("connect call refused", "caller", p.Name, "procedure", procedure, "err", err)
			return nil, connect.NewError(connect.CodePermissionDenied, reason(err))
		}
		return res, nil
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler checks the caller and the roles table; the API has
// no streaming RPC today, so no message rule applies.
func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p, err := i.authorize(ctx, conn.RequestHeader(), conn.Spec().Procedure, nil, conn.Peer().Addr)
		if err != nil {
			return err
		}
		return next(NewContext(ctx, p), conn)
	}
}

func (i *interceptor) authorize(ctx context.Context, h http.Header, procedure string, msg any, remote string) (*Principal, error) {
	p, err := i.a.Authenticate(h.Get("Authorization"), PeerCertificates(ctx))
	if err != nil {
		i.log.Info("connect call unauthenticated", "procedure", procedure, "remote", remote, "err", err)
		ce := connect.NewError(connect.CodeUnauthenticated, reason(err))
		ce.Meta().Set("WWW-Authenticate", wwwAuthenticate)
		return nil, ce
	}
	if err := i.pol.Check(ctx, p, procedure, msg); err != nil {
		i.log.Warn("connect call refused", "caller", p.Name, "procedure", procedure, "remote", remote, "err", err)
		return nil, connect.NewError(connect.CodePermissionDenied, reason(err))
	}
	return p, nil
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it keeps the connection in
// the context so the interceptor can read a TLS client certificate.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// PeerCertificates returns the verified client certificate chain (leaf
// first) of the TLS connection behind ctx, or nil. An unverified
// certificate never counts.
func PeerCertificates(ctx context.Context) []*x509.Certificate {
	tc, ok := ctx.Value(connKey{}).(*tls.Conn)
	if !ok {
		return nil
	}
	return verified(tc.ConnectionState())
}

func verified(st tls.ConnectionState) []*x509.Certificate {
	if len(st.VerifiedChains) == 0 {
		return nil
	}
	return st.VerifiedChains[0]
}

// reason is err without the sentinel's prefix, which the Connect code
// already says.
func reason(err error) error {
	s := err.Error()
	for _, sentinel := range []error{ErrUnauthenticated, ErrPermissionDenied} {
		s = strings.TrimPrefix(s, sentinel.Error()+": ")
	}
	return errors.New(s)
}

// codeOf maps this package's errors to Connect codes.
func codeOf(err error) connect.Code {
	if errors.Is(err, ErrUnauthenticated) {
		return connect.CodeUnauthenticated
	}
	return connect.CodePermissionDenied
}
