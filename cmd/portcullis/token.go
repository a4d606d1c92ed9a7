package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
)

// apiFlags adds the flags of a command that calls the API: --token
// (default $PORTCULLIS_TOKEN), and for an https:// --addr --ca and
// --client-cert/--client-key. It returns the HTTP client they make.
func apiFlags(cmd *cobra.Command, persistent bool) func() (*http.Client, error) {
	var token, ca, cert, key string
	f := cmd.Flags()
	if persistent {
		f = cmd.PersistentFlags()
	}
	f.StringVar(&token, "token", "", "bearer token of a caller in the gateway's callers: (default $PORTCULLIS_TOKEN)")
	f.StringVar(&ca, "ca", "", "CA certificate (PEM) that signed an https:// gateway's certificate (default: system roots)")
	f.StringVar(&cert, "client-cert", "", "client certificate (PEM) for mTLS; its cert_sha256 names the caller")
	f.StringVar(&key, "client-key", "", "private key (PEM) of --client-cert")
	return func() (*http.Client, error) {
		if token == "" {
			token = os.Getenv("PORTCULLIS_TOKEN")
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if ca != "" || cert != "" || key != "" {
			tc := &tls.Config{MinVersion: tls.VersionTLS12}
			if ca != "" {
				pem, err := os.ReadFile(ca)
				if err != nil {
					return nil, fmt.Errorf("--ca: %w", err)
				}
				tc.RootCAs = x509.NewCertPool()
				if !tc.RootCAs.AppendCertsFromPEM(pem) {
					return nil, fmt.Errorf("--ca %s: no PEM certificate", ca)
				}
			}
			if cert != "" || key != "" {
				c, err := tls.LoadX509KeyPair(cert, key)
				if err != nil {
					return nil, fmt.Errorf("--client-cert/--client-key: %w", err)
				}
				tc.Certificates = []tls.Certificate{c}
			}
			tr.TLSClientConfig = tc
		}
		var rt http.RoundTripper = tr
		if token != "" {
			rt = bearer{token: token, next: tr}
		}
		return &http.Client{Transport: rt}, nil
	}
}

// bearer adds Authorization: Bearer TOKEN to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
