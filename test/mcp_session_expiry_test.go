package test

import (
	"io"
	"net/http"
	"strings"
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

// legacyPost sends one 2025-11-25 JSON-RPC message (in session sid unless
// empty) and returns the status, the session id answered and the body.
func legacyPost(t *testing.T, g *server.Gateway, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// legacyOpen opens a stateful session on g.
func legacyOpen(t *testing.T, g *server.Gateway) string {
	t.Helper()
	code, sid, body := legacyPost(t, g, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	if code, _, body := legacyPost(t, g, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code >= 300 {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

const toolsList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// waitStatus sends tools/list in session sid to g until it answers want.
func waitStatus(t *testing.T, g *server.Gateway, sid string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, body := legacyPost(t, g, sid, toolsList)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: tools/list answered %d %s, want %d", what, code, body, want)
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
	if code, _, body := legacyPost(t, g1, sid, toolsList); code != http.StatusOK {
		t.Fatalf("the session on its own gateway: %d %s", code, body)
	}
}

// A stateful session left without a DELETE is closed after its idle
// time; requests keep it open.
func TestMCPIdleSessionIsClosed(t *testing.T) {
	g := startSessionGateway(t, mcpConfig(t, newTarget(t)), "", 1500*time.Millisecond, 0)
	sid := legacyOpen(t, g)
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		if code, _, body := legacyPost(t, g, sid, toolsList); code != http.StatusOK {
			t.Fatalf("a session in use was closed: %d %s", code, body)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	if code, _, body := legacyPost(t, g, sid, toolsList); code != http.StatusNotFound {
		t.Fatalf("after its idle time: %d %s, want 404", code, body)
	}
}
