package test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/server"
)

// startSessionGateway starts an MCP gateway with its session limits set.
func startSessionGateway(t *testing.T, cfg, natsURL string, idle, ownerTTL time.Duration) *server.Gateway {
	t.Helper()
	return startMCPGatewayWith(t, cfg, natsURL, io.Discard, func(o *server.Options) {
		o.MCPSessionIdle, o.SessionOwnerTTL = idle, ownerTTL
	})
}

// legacyPost sends one 2025-11-25 JSON-RPC message as the agent (in
// session sid unless empty).
func legacyPost(t *testing.T, g *server.Gateway, sid, body string) rawResp {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	if sid != "" {
		h["Mcp-Session-Id"] = sid
	}
	return rawPost(t, g, agentToken, h, body)
}

// legacyOpen opens a stateful session on g.
func legacyOpen(t *testing.T, g *server.Gateway) string {
	t.Helper()
	r := legacyPost(t, g, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if r.code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", r.code, sid, r.body)
	}
	if r := legacyPost(t, g, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.code >= 300 {
		t.Fatalf("initialized: %d %s", r.code, r.body)
	}
	return sid
}

const toolsList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// waitStatus sends tools/list in session sid to g until it answers want.
func waitStatus(t *testing.T, g *server.Gateway, sid string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := legacyPost(t, g, sid, toolsList)
		if r.code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: tools/list answered %d %s, want %d", what, r.code, r.body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A stateful session's owner record expires (here after a second), so
// META does not keep one record per session ever opened; while the
// record is gone another gateway cannot place the session (404: the
// client opens a new one), until the gateway that holds the session
// claims it again, and the other gateway forwards again.
func TestMCPSessionOwnerRecordExpiresAndIsClaimedAgain(t *testing.T) {
	cfg := mcpConfig(t, newTarget(t))
	g1 := startSessionGateway(t, cfg, "", 0, time.Second)
	g2 := startSessionGateway(t, cfg, g1.NatsURL, 0, time.Second)
	sid := legacyOpen(t, g1)
	waitStatus(t, g2, sid, http.StatusOK, "forwarded while the record lives")
	waitStatus(t, g2, sid, http.StatusNotFound, "after the record expired")
	waitStatus(t, g2, sid, http.StatusOK, "forwarded after the owner claimed again")
	if r := legacyPost(t, g1, sid, toolsList); r.code != http.StatusOK {
		t.Fatalf("the session on its own gateway: %d %s", r.code, r.body)
	}
}

// A stateful session left without a DELETE is closed after its idle
// time; requests keep it open.
func TestMCPIdleSessionIsClosed(t *testing.T) {
	g := startSessionGateway(t, mcpConfig(t, newTarget(t)), "", 1500*time.Millisecond, 0)
	sid := legacyOpen(t, g)
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		if r := legacyPost(t, g, sid, toolsList); r.code != http.StatusOK {
			t.Fatalf("a session in use was closed: %d %s", r.code, r.body)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	if r := legacyPost(t, g, sid, toolsList); r.code != http.StatusNotFound {
		t.Fatalf("after its idle time: %d %s, want 404", r.code, r.body)
	}
}
