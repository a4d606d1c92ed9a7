package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// owners answers every lookup with err (or owner).
type owners struct {
	owner string
	err   error
}

func (o owners) Claim(context.Context, string, string) (time.Time, error) { return time.Time{}, nil }
func (o owners) Owner(context.Context, string) (string, error) {
	return o.owner, o.err
}
func (o owners) GatewayURL(context.Context, string) (string, error) {
	return o.owner, o.err
}

// A session this gateway does not hold, whose owner cannot be looked up
// (the ledger slow or away), is answered 503 with Retry-After: the
// session may be alive on another gateway, and "session not found" would
// make the client drop it. An owner that is not recorded, or is this
// gateway, leaves the request to this gateway (which then refuses an
// unknown session itself).
func TestForwardWhenOwnerLookupFails(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name    string
		owners  owners
		handled bool
		code    int
	}{
		{"lookup fails", owners{err: errors.New("nats: timeout")}, true, http.StatusServiceUnavailable},
		{"no owner recorded", owners{}, false, 0},
		{"owned here", owners{owner: "http://self"}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gateway{log: log, local: map[string]*time.Timer{}, owners: tc.owners, self: "http://self"}
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			if handled := g.forward(w, r, "sid-1", time.Time{}); handled != tc.handled {
				t.Fatalf("handled %v, want %v", handled, tc.handled)
			}
			if tc.handled && (w.Code != tc.code || w.Header().Get("Retry-After") == "") {
				t.Fatalf("answer %d (Retry-After %q), want %d with Retry-After", w.Code, w.Header().Get("Retry-After"), tc.code)
			}
		})
	}
}

// A session whose owner is recorded but does not answer (its gateway is
// down: nothing listens at its address) is "not found", so the client opens
// a new session; it was a 502 with no body, which clients retried for ever.
func TestForwardWhenOwnerIsDown(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	down := ln.URL
	ln.Close() // nothing listens there now
	g := &Gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil)), local: map[string]*time.Timer{}, owners: owners{owner: down}, self: "http://self"}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if !g.forward(w, r, "sid-1", time.Time{}) {
		t.Fatal("not forwarded")
	}
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "start a new session") {
		t.Fatalf("owner down: %d %s, want 404 saying to start a new session", w.Code, w.Body.String())
	}
}
