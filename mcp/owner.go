package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// SessionOwners records which gateway holds each stateful MCP session, so
// a request for a session that lives on another gateway (a resumption with
// Last-Event-ID after a load balancer moved the client, say) is forwarded
// to its owner instead of failing with "session not found". The response
// streams themselves are in JetStream, so the owner replays what was sent.
// It also finds the gateway that received a call (tasks.go, forwardTask).
type SessionOwners interface {
	// Claim records this gateway as the session's owner and reports when
	// that record expires (zero: never); Gateway.claim claims a session
	// that outlives its record again. Claiming again while this gateway's
	// own record is still there keeps it and reports its expiry.
	Claim(ctx context.Context, sessionID, ownerURL string) (expires time.Time, err error)
	// Owner returns the owner's URL ("" when unknown). It must return only
	// the recorded address of an enrolled gateway, never whatever an owner
	// record says: the request is forwarded there with the agent's token.
	Owner(ctx context.Context, sessionID string) (string, error)
	// GatewayURL returns the address gatewayID enrolled with last ("" when
	// it is this gateway, or none is recorded): only an enrolment the
	// ledger's root signed names it.
	GatewayURL(ctx context.Context, gatewayID string) (string, error)
}

const (
	ownerLookupMax = 5 * time.Second
	claimMax       = 5 * time.Second
	// reclaimPause is how long a session whose claim failed waits before
	// the next try.
	reclaimPause = time.Minute
	// claimAgainMin spaces the claims of one session when its record
	// outlives its expiry (the server removes it on a timer).
	claimAgainMin = time.Second
)

// claim records this gateway as the owner of a session it holds. A record
// that expires (owner records live a bounded time, a session may live
// longer) is claimed again once it has; until then another gateway cannot
// place the session (it answers 404 and the client opens a new session).
// A claim that failed is tried again after reclaimPause.
func (g *Gateway) claim(ctx context.Context, sessionID string) {
	g.mu.Lock()
	owners, self := g.owners, g.self
	_, held := g.local[sessionID]
	g.mu.Unlock()
	if owners == nil || !held {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimMax)
	expires, err := owners.Claim(cctx, sessionID, self)
	cancel()
	next := time.Until(expires)
	switch {
	case err != nil:
		g.log.Warn("session owner", "session", sessionID, "err", err, "retry_in", reclaimPause)
		next = reclaimPause
	case expires.IsZero():
		return // kept for good
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, held := g.local[sessionID]; held {
		g.local[sessionID] = time.AfterFunc(max(next, claimAgainMin), func() { g.claim(context.Background(), sessionID) })
	}
}

// SetOwners lets the gateway record and look up session owners; self is
// this gateway's base URL (known once it listens).
func (g *Gateway) SetOwners(o SessionOwners, self string) {
	g.mu.Lock()
	g.owners, g.self = o, self
	g.mu.Unlock()
}

// hold marks a session as held by this gateway.
func (g *Gateway) hold(sessionID string) {
	g.mu.Lock()
	g.local[sessionID] = nil
	g.mu.Unlock()
}

// release forgets a session that ended, and its next claim. The caller
// holds g.mu.
func (g *Gateway) release(sessionID string) {
	if t := g.local[sessionID]; t != nil {
		t.Stop()
	}
	delete(g.local, sessionID)
}

// forward sends a request for a session this gateway does not hold to the
// gateway that does. It reports whether it handled the request. The owner
// learns how long ago the request's bytes arrived here (arrivalAgeHeader;
// "unknown" when arrivedAt is zero): its own connection is this
// gateway's, where the agent's pipelining is not visible. When the owner
// cannot be looked up (the ledger slow or away), the answer is 503 with
// Retry-After, not "session not found": a 404 makes the client drop a
// session that may well be alive on another gateway.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, sessionID string, arrivedAt time.Time) bool {
	g.mu.Lock()
	owners, self := g.owners, g.self
	_, local := g.local[sessionID]
	g.mu.Unlock()
	if owners == nil || local {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), ownerLookupMax)
	owner, err := owners.Owner(ctx, sessionID)
	cancel()
	if err != nil {
		g.log.Warn("session owner lookup failed; answering 503", "err", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"the session's gateway could not be looked up; retry"}`, http.StatusServiceUnavailable)
		return true
	}
	if owner == "" || owner == self {
		return false
	}
	target, err := url.Parse(owner)
	if err != nil {
		return false
	}
	age := "unknown"
	if !arrivedAt.IsZero() {
		age = strconv.FormatInt(int64(max(time.Since(arrivedAt), 0)), 10)
	}
	r.Header.Set(arrivalAgeHeader, age)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // server-sent events: pass every event on at once
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Nothing reached the owner: it is down (a session lives in
			// its gateway's memory, so a restarted owner answers 404 too)
			// or cut off. "Not found" makes the client open a new session
			// here; a 502 without a body left it retrying a session that
			// may never answer again (an audit on a cluster).
			g.log.Warn("session owner unreachable; answering 404", "session_owner", owner, "err", err)
			http.Error(w, `{"error":"session not found: the gateway that holds it does not answer; start a new session"}`, http.StatusNotFound)
			return
		}
		g.log.Warn("forwarding to the session owner failed", "session_owner", owner, "err", err)
		http.Error(w, `{"error":"the session's gateway failed while answering; the call's outcome is in the ledger: retry it"}`, http.StatusBadGateway)
	}
	proxy.ServeHTTP(w, r)
	return true
}
