package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/config"
)

// newAuthenticator builds the caller check from the config's callers:.
// Without callers the gateway serves one local operator, and only on a
// loopback address: anyone who can reach the port would otherwise hold
// every role.
func newAuthenticator(cfg *config.Config, o Options, lg *slog.Logger) (*auth.Authenticator, error) {
	callers := make([]auth.Caller, 0, len(cfg.Callers))
	for _, c := range cfg.Callers {
		x := auth.Caller{Name: c.Name, TokenSHA256: c.TokenSHA256, CertSHA256: c.CertSHA256, ActsFor: c.ActsFor, Accounts: c.Accounts}
		for _, r := range c.Roles {
			x.Roles = append(x.Roles, auth.Role(r))
		}
		if x.CertSHA256 != "" && o.ClientCA == "" {
			return nil, fmt.Errorf("%s: callers.%s.cert_sha256 needs serve --tls-cert, --tls-key and --client-ca", cfg.Path, c.Name)
		}
		callers = append(callers, x)
	}
	a, err := auth.New(callers, cfg.BudgetAccounts())
	if err != nil {
		return nil, fmt.Errorf("callers: %w", err)
	}
	if a.Local() {
		if !loopback(o.Listen) {
			return nil, fmt.Errorf("--listen %s is not a loopback address and the config has no callers: every caller would act as %s with every role; add callers: (see docs/auth.md) or listen on 127.0.0.1", o.Listen, auth.LocalOperator)
		}
		lg.Warn("no callers: configured; every Connect call is the single local operator with every role (loopback only)", "principal", auth.LocalOperator, "listen", o.Listen)
	}
	return a, nil
}

// loopback reports whether a HOST:PORT names only this machine.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverTLS is the listener's TLS config when --tls-cert and --tls-key are
// given (nil otherwise). With --client-ca, a client certificate signed by
// that CA is verified when sent; callers.X.cert_sha256 then names the
// caller. A bearer token works on TLS connections too.
func serverTLS(o Options) (*tls.Config, error) {
	if o.TLSCert == "" && o.TLSKey == "" {
		if o.ClientCA != "" {
			return nil, errors.New("--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if o.TLSCert == "" || o.TLSKey == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if o.ClientCA != "" {
		pem, err := os.ReadFile(o.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client ca %s: no PEM certificate", o.ClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return c, nil
}
