package test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/server"
)

// rawRequest is one POST /mcp as HTTP/1.1 bytes.
func rawRequest(g *server.Gateway, h map[string]string, body string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", g.Addr, agentToken)
	for k, v := range h {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return b.Bytes()
}

// readRaw reads one response from a raw connection.
func readRaw(t *testing.T, rd *bufio.Reader) rawResp {
	t.Helper()
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return rawResp{resp.StatusCode, resp.Header, string(b)}
}

// A request that was sent before the previous response was read is no
// evidence that the agent read it. One raw socket sends a tools/call and a
// ping back to back (HTTP/1.1 pipelining, both in one write): Go's server
// runs the ping's handler only after the call's response was written, and
// the ping used to count as "a later request on the same connection", so
// the call was marked DELIVERED and a keyless retry became a new
// execution: the target acted twice. Now the ping's arrival is when its
// bytes arrived (before the response completed): the call stays
// COMPLETED_RESULT_NOT_DELIVERED and the retry gets the stored result. A
// request sent after the response was read still delivers it.
func TestMCPPipelinedRequestIsNoEvidence(t *testing.T) {
	tg := newTarget(t)
	cfg := mcpConfig(t, tg)
	g := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g.NatsURL)
	for _, tc := range []struct {
		name    string
		session bool
		// apart: the ping is written while the call is at the target
		// (after its bytes, before its response), not in the same write.
		apart bool
		// forwarded: both go to another gateway, which forwards them to
		// the session's owner (where the agent's pipelining is not seen).
		forwarded bool
	}{
		{"stateless 2026-07-28", false, false, false},
		{"2025-11-25 session", true, false, false},
		{"stateless, ping written while the call runs", false, true, false},
		{"session, ping written while the call runs", true, true, false},
		{"session, through another gateway", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := fmt.Sprintf("pipe-%v-%v-%v", tc.session, tc.apart, tc.forwarded)
			args := map[string]any{"release_id": release}
			var callH, pingH map[string]string
			var callBody, pingBody string
			if tc.session {
				sid := rawSession(t, g, agentToken)
				callH = map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
				pingH = callH
				callBody = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy_release","arguments":{"release_id":"` + release + `"}}}`
				pingBody = `{"jsonrpc":"2.0","id":3,"method":"ping"}`
			} else {
				callH, callBody = modernRequest(1, "tools/call", "deploy_release", map[string]any{"arguments": args}, nil, false)
				pingH, pingBody = modernRequest(2, "ping", "", nil, nil, false)
			}
			performed := tg.performed.Load()
			via := g
			if tc.forwarded {
				via = g2
			}
			conn, err := net.Dial("tcp", via.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if tc.apart {
				tg.delay.Store(int64(150 * time.Millisecond)) // the call stays at the target a while (its timeout is 300ms)
				defer tg.delay.Store(0)
				seen := tg.seen.Load()
				if _, err := conn.Write(rawRequest(g, callH, callBody)); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the call is at the target", func() bool { return tg.seen.Load() > seen })
				if _, err := conn.Write(rawRequest(g, pingH, pingBody)); err != nil {
					t.Fatal(err)
				}
			} else if _, err := conn.Write(append(rawRequest(g, callH, callBody), rawRequest(g, pingH, pingBody)...)); err != nil {
				t.Fatal(err)
			}
			// Nothing is read until the ping was answered and any
			// evidence it gave would have been appended.
			waitFor(t, "the call reaches the target", func() bool { return tg.performed.Load() == performed+1 })
			time.Sleep(500 * time.Millisecond)
			rd := bufio.NewReader(conn)
			call := readRaw(t, rd)
			if ping := readRaw(t, rd); ping.code != http.StatusOK {
				t.Fatalf("ping: %d %s", ping.code, ping.body)
			}
			id := resultRecord(t, call.message(t))["execution_id"].(string)
			time.Sleep(300 * time.Millisecond)
			if x := getExecution(t, g, id); x.GetState().String() != "STATE_COMPLETED_RESULT_NOT_DELIVERED" {
				t.Fatalf("after a pipelined ping: %v, want COMPLETED_RESULT_NOT_DELIVERED (the ping was sent before the result was read)", x.GetState())
			}
			// The agent lost the answer: its keyless retry gets the stored
			// result and the target does not act again.
			var rec map[string]any
			if tc.session {
				sid := rawSession(t, g, agentToken)
				r := rawPost(t, g, agentToken, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, callBody)
				rec = resultRecord(t, r.message(t))
			} else {
				rec = resultRecord(t, modernCall(t, g, agentToken, 3, "deploy_release", args, nil, false))
			}
			if rec["execution_id"] != id || !strings.Contains(fmt.Sprint(rec["why"]), "stored result") || tg.performed.Load() != performed+1 {
				t.Fatalf("keyless retry: %v; the target performed %d, want %d", rec, tg.performed.Load(), performed+1)
			}
			// A request sent after the response was read is evidence.
			if _, err := conn.Write(rawRequest(g, pingH, strings.Replace(pingBody, `"id":`, `"id":1`, 1))); err != nil {
				t.Fatal(err)
			}
			if ping := readRaw(t, rd); ping.code != http.StatusOK {
				t.Fatalf("later ping: %d %s", ping.code, ping.body)
			}
			waitState(t, g, id, "STATE_DELIVERED")
		})
	}
}

// An agent that closes its connection with the response unread resets it
// (TCP RST): no later request of its session is evidence that it read that
// response. One raw socket sends a tools/call and closes once the whole
// response is in its receive queue, unread (a client whose timeout fired
// as the bytes came); the agent then pings on the same session from a new
// connection and retries the call without a key. The ping used to mark the
// call DELIVERED, so the retry became a new execution and the target acted
// twice; now the call stays COMPLETED_RESULT_NOT_DELIVERED and the retry
// gets the stored result.
func TestMCPResetConnectionIsNoEvidence(t *testing.T) {
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	sid := rawSession(t, g, agentToken)
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	call := func(id int, release string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"deploy_release","arguments":{"release_id":%q}}}`, id, release)
	}
	// A second call whose result the agent reads and acknowledges after the
	// ping: its DELIVERED lands after any the ping gave (the marker appends
	// in order), so once it is there the ping's evidence would be too.
	other := resultRecord(t, rawPost(t, g, agentToken, h, call(2, "reset-other")).message(t))["execution_id"].(string)

	performed := tg.performed.Load()
	conn, err := net.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(rawRequest(g, h, call(3, "reset-lost"))); err != nil {
		t.Fatal(err)
	}
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the whole response is in the agent's receive queue", func() bool {
		buf := make([]byte, 1<<16)
		n := 0
		raw.Read(func(fd uintptr) bool {
			n, _, _ = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		})
		got := string(buf[:max(n, 0)])
		return strings.Contains(got, "execution_id") && strings.HasSuffix(got, "\r\n0\r\n\r\n") // the last chunk
	})
	conn.Close() // unread bytes: the kernel resets the connection

	if r := rawPost(t, g, agentToken, h, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); r.code != http.StatusOK {
		t.Fatalf("ping: %d %s", r.code, r.body)
	}
	ack := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/io.portcullis/ack","params":{"_meta":{"io.portcullis/ack":[%q]}}}`, other)
	if r := rawPost(t, g, agentToken, h, ack); r.code != http.StatusAccepted {
		t.Fatalf("ack: %d %s", r.code, r.body)
	}
	waitState(t, g, other, "STATE_DELIVERED")

	retry := resultRecord(t, rawPost(t, g, agentToken, map[string]string{"Mcp-Session-Id": rawSession(t, g, agentToken), "Mcp-Protocol-Version": "2025-11-25"}, call(5, "reset-lost")).message(t))
	id := retry["execution_id"].(string)
	if !strings.Contains(fmt.Sprint(retry["why"]), "stored result") || tg.performed.Load() != performed+1 {
		t.Fatalf("keyless retry after a reset: %v; the target performed %d, want %d", retry, tg.performed.Load(), performed+1)
	}
	if x := getExecution(t, g, id); x.GetState().String() != "STATE_COMPLETED_RESULT_NOT_DELIVERED" {
		t.Fatalf("after a reset and a ping: %v, want COMPLETED_RESULT_NOT_DELIVERED", x.GetState())
	}
}
