package main

import (
	"net/http"
	"os"

	"github.com/spf13/cobra"
)

// tokenFlag adds --token (default $PORTCULLIS_TOKEN) to a command that
// calls the API, and returns the HTTP client that sends it.
func tokenFlag(cmd *cobra.Command, persistent bool) func() *http.Client {
	var token string
	f := cmd.Flags()
	if persistent {
		f = cmd.PersistentFlags()
	}
	f.StringVar(&token, "token", "", "bearer token of a caller in the gateway's callers: (default $PORTCULLIS_TOKEN)")
	return func() *http.Client {
		t := token
		if t == "" {
			t = os.Getenv("PORTCULLIS_TOKEN")
		}
		if t == "" {
			return http.DefaultClient
		}
		return &http.Client{Transport: bearer{token: t, next: http.DefaultTransport}}
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
