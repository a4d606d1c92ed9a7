// Package mcp is the agents' front door: an MCP Streamable HTTP endpoint
// (the official go-sdk) serving both protocol generations (stateful
// 2025-11-25 sessions and stateless 2026-07-28 requests), bearer
// authentication, sessions bound to the agent that opened them, delivery
// evidence and durable MCP tasks. Every tools/call goes to the recovery-table
// driver (package dispatch); this package only translates its answer into
// MCP content. What an agent gets back on a retry is the stored result or a
// clear state (outcome_unknown, awaiting_approval, needs_review, denied,
// in_flight) with the execution id, the first dispatch time and why nothing
// was resent; never a made-up error.
package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"
	"github.com/portcullis-dev/portcullis/toolcall"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	"github.com/portcullis-dev/portcullis/ledger"
)

// _meta keys an agent may send with a request.
const (
	MetaIntentScope  = "io.portcullis/intent-scope"
	MetaOperationKey = "io.portcullis/operation-key"
	MetaIdemKey      = "idempotency-key" // what commerce MCP servers already use
	MetaExecution    = "io.portcullis/execution"
	// MetaAck acknowledges receipt of results: an execution id or a list of
	// them, on any request or on the notification MethodAck.
	MetaAck = "io.portcullis/ack"
)

// MethodAck is the notification an agent sends to acknowledge results
// without another request ({"_meta": {"io.portcullis/ack": [ids]}}).
const MethodAck = "notifications/io.portcullis/ack"

// Limits of the endpoint.
const (
	MaxRequestBytes = 1 << 20
	requestHeader   = "X-Portcullis-Request"
	jsonrpcIDHeader = "X-Portcullis-Jsonrpc-Id"
	// maxTrackedSessions bounds the session → actor bindings.
	maxTrackedSessions = 1 << 16
	// modernVersion is the first protocol generation without sessions.
	modernVersion = "2026-07-28"
)

// internalHeaders are set by the front door only; a client's are dropped.
var internalHeaders = []string{requestHeader, jsonrpcIDHeader}

// Gateway serves /mcp.
type Gateway struct {
	ledger *ledger.Service
	driver *dispatch.Driver
	tools  map[string]config.Tool
	agents map[[sha256.Size]byte]string // sha256(token) → actor
	log    *slog.Logger
	locked bool // the vault is locked: every action is refused

	upstreams map[string]*upstream
	events    sdk.EventStore
	journal   *Journal
	delivery  *delivery
	approvals approvals // calls of tasks awaiting approval (approved.go)

	binder *toolcall.Binder // the same binding as Connect Begin

	mu            sync.Mutex
	sessionActors map[string]string // MCP session id → the actor that opened it (the binding)
	sessionRemote map[string]string // MCP session id → the remote address of the connection that opened it
	// local are the sessions this gateway holds, each with the timer of
	// its next owner claim (nil: none due).
	local  map[string]*time.Timer
	owners SessionOwners
	self   string

	// SessionIdle closes a stateful (2025-11-25) session after this long
	// without a request (the SDK's SessionTimeout; 0: never). Set it before
	// Handler.
	SessionIdle time.Duration
}

// New builds the gateway from the config's tools and agents. Response
// streams are kept in events (nil: in memory).
func New(l *ledger.Service, cfg *config.Config, events sdk.EventStore, journal *Journal, log *slog.Logger) (*Gateway, error) {
	if events == nil {
		events = sdk.NewMemoryEventStore(nil)
	}
	g := &Gateway{ledger: l, driver: dispatch.New(l, log), tools: map[string]config.Tool{}, agents: agentDigests(cfg.Agents), log: log, locked: cfg.VaultLocked,
		events: events, journal: journal, sessionActors: map[string]string{}, sessionRemote: map[string]string{}, local: map[string]*time.Timer{}}
	g.delivery = newDelivery(l, log)
	for name, t := range cfg.Tools {
		if t.Channel == "" {
			continue // contract only: run by outside executors through the Connect API
		}
		g.tools[name] = t
	}
	binder, err := toolcall.New(g.tools)
	if err != nil {
		return nil, err
	}
	g.binder = binder
	g.openUpstreams(cfg)
	g.driver.Handle("mcp", upstreamExecutor{g})
	return g, nil
}

func (g *Gateway) server() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "portcullis", Version: "0.1.0"}, &sdk.ServerOptions{InitializedHandler: g.initialized})
	for name, t := range g.tools {
		var schema any = map[string]any{"type": "object"}
		if len(t.InputSchema) > 0 {
			schema = json.RawMessage(t.InputSchema)
		}
		if t.Channel == "mcp" && len(t.InputSchema) == 0 {
			if up := g.upstreamTool(t.Upstream, name); up != nil {
				schema = up.InputSchema
				if t.Description == "" {
					t.Description = up.Description
				}
			}
		}
		s.AddTool(&sdk.Tool{Name: name, Description: t.Description, InputSchema: schema}, g.call(t))
	}
	for uname, u := range g.upstreams {
		for _, ut := range u.tools {
			if ct, ok := g.tools[ut.Name]; ok {
				// Contracted here (this upstream's tool, or a tool of
				// another channel or upstream of the same name, which
				// keeps the name: an upstream's listing never disables a
				// contracted tool).
				if ct.Upstream != uname {
					g.log.Warn("an upstream tool has the name of a contracted tool; the contracted tool keeps it", "tool", ut.Name, "upstream", uname)
				}
				continue
			}
			why := fmt.Sprintf("unavailable: tool %s of upstream %s has no contract in the Portcullis config", ut.Name, uname)
			s.AddTool(&sdk.Tool{Name: ut.Name, Description: why, InputSchema: ut.InputSchema},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return refused(why + "; the call was refused and nothing was sent"), nil
				})
		}
	}
	return s
}

func (g *Gateway) upstreamTool(upstream, name string) *sdk.Tool {
	if u, ok := g.upstreams[upstream]; ok {
		for _, t := range u.tools {
			if t.Name == name {
				return t
			}
		}
	}
	return nil
}

// Handler is the /mcp endpoint: bearer authentication, the session
// binding, delivery evidence, the tasks extension, then the SDK's Streamable
// HTTP transport: stateful for 2025-11-25 and older, stateless for
// 2026-07-28 (and for server/discover, so it lists both generations).
func (g *Gateway) Handler() http.Handler {
	srv := g.server()
	getServer := func(*http.Request) *sdk.Server { return srv }
	stateful := sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxRequestBytes, Logger: g.log, EventStore: g.events, SessionTimeout: g.SessionIdle,
	})
	stateless := sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxRequestBytes, Logger: g.log, Stateless: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := g.actor(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis"`)
			http.Error(w, `{"error":"missing or unknown bearer token"}`, http.StatusUnauthorized)
			return
		}
		for _, h := range internalHeaders {
			r.Header.Del(h)
		}
		var msg message
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
			if err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					http.Error(w, fmt.Sprintf(`{"error":"request body larger than %d bytes"}`, MaxRequestBytes), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, `{"error":"unreadable request body"}`, http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			msg = parseMessage(body)
		}
		// When this request's bytes arrived (arrival.go), not when its
		// handler started: a pipelined request's handler starts after the
		// previous response completed, though it was sent before that.
		arrivedAt, forwarded := requestArrival(r)
		r.Header.Del(arrivalAgeHeader)
		ac := connOf(r)
		if ac != nil {
			ac.mark() // the body is read: bytes read from now on are the next request's
		}
		sid := r.Header.Get("Mcp-Session-Id")
		if sid != "" {
			if g.forward(w, r, sid, arrivedAt) {
				return // the owner checks the binding
			}
			if !g.boundTo(sid, actor) {
				// Another agent's session (or none): refused, and it sees nothing.
				http.Error(w, `{"error":"session not found"}`, http.StatusNotFound)
				return
			}
		}
		// Our _meta keys, checked before anything happens: a malformed
		// one is refused and changes nothing (no evidence, no
		// acknowledgement, nothing recorded or sent).
		cm, err := msg.readMeta()
		if err == nil {
			err = checkKeyUse(msg, cm, g.tools)
		}
		if err != nil {
			refuseMeta(w, msg.ID, err)
			return
		}
		// Where evidence is looked for: this HTTP/1.x connection (not one
		// forwarded from another gateway: that one carries many agents'
		// requests) and the session.
		var keys []string
		if ac != nil && r.ProtoMajor == 1 && !forwarded {
			keys = append(keys, "c:"+strconv.FormatUint(ac.id, 36))
		}
		if sid != "" {
			keys = append(keys, "s:"+sid)
		}
		switch {
		case r.Method == http.MethodPost && msg.Method != "":
			// A later request on the same session or connection, whose
			// bytes arrived after a response there completed: the agent
			// read that response.
			g.delivery.evidence(r.Context(), actor, keys, arrivedAt)
			g.delivery.ack(r.Context(), actor, cm.acks)
		case r.Method == http.MethodGet && sid != "" && r.Header.Get("Last-Event-ID") != "":
			g.delivery.resumed(r.Context(), g.events, actor, sid, r.Header.Get("Last-Event-ID"))
		}
		switch {
		case msg.Method == MethodAck:
			w.WriteHeader(http.StatusAccepted)
			return
		case msg.Method == "ping" && scalarID(msg.ID) && sid == "" && r.Header.Get("Mcp-Protocol-Version") >= modernVersion:
			// Answered here: the Go SDK's own client (v1.8.0) sends a
			// stateless ping without the _meta protocol version its
			// stateless server then requires, so its keep-alive failed and
			// closed the agent's session. A ping changes nothing.
			writeRPC(w, msg.ID, map[string]any{}, nil)
			return
		case msg.Method == methodTasksGet || msg.Method == methodTasksCancel:
			g.serveTasks(w, r, actor, keys, msg, forwarded)
			return
		case msg.Method == "tools/call" && msg.declaresTasks():
			g.serveTaskCall(w, r, actor, sid, keys, msg)
			return
		}
		nonce := ulid.Make().String()
		g.delivery.begin(nonce)
		r.Header.Set(requestHeader, nonce)
		if id := msg.jsonrpcID(); id != "" {
			r.Header.Set(jsonrpcIDHeader, id)
		}
		tw := &trackingWriter{ResponseWriter: w}
		h := stateful
		if msg.Method == "server/discover" || (sid == "" && r.Header.Get("Mcp-Protocol-Version") >= modernVersion) {
			h = stateless
		}
		if sid == "" && h == stateful {
			// A new session: bind it before the client can learn its id.
			tw.onHeader = func(hd http.Header) {
				if newSid := hd.Get("Mcp-Session-Id"); newSid != "" {
					g.bind(newSid, actor, r.RemoteAddr)
					keys = append(keys, "s:"+newSid)
				}
			}
		}
		h.ServeHTTP(tw, r)
		g.delivery.responded(r.Context(), nonce, actor, keys, responseConn(r), tw.completedAt(), tw.failed || r.Context().Err() != nil)
	})
}

// bind records that a new session belongs to actor; every later request
// with its Mcp-Session-Id must come from the same actor.
func (g *Gateway) bind(sid, actor, remote string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sessionActors) < maxTrackedSessions {
		g.sessionActors[sid] = actor
		g.sessionRemote[sid] = remote
	} else {
		g.log.Warn("mcp session not bound: too many sessions; its requests will be refused", "limit", maxTrackedSessions)
	}
}

// boundTo reports whether sid is a session this gateway bound to actor.
func (g *Gateway) boundTo(sid, actor string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, ok := g.sessionActors[sid]
	return ok && a == actor
}

// actor authenticates the caller; the actor never comes from the body.
func (g *Gateway) actor(h http.Header) (string, bool) {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", false
	}
	a, ok := g.agents[sha256.Sum256([]byte(tok))]
	return a, ok
}

// agentDigests keys the config's agents (lower-case hex SHA-256 of the
// token → actor) by the digest itself, so authenticating a request hashes
// the token and encodes nothing. A key that is not 64 lower-case hex digits
// matches no token, as before.
func agentDigests(agents map[string]string) map[[sha256.Size]byte]string {
	out := make(map[[sha256.Size]byte]string, len(agents))
	for h, actor := range agents {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != h {
			continue
		}
		out[[sha256.Size]byte(b)] = actor
	}
	return out
}

// trackingWriter notes whether writing the response failed, and shows the
// response header to onHeader before it is sent.
type trackingWriter struct {
	http.ResponseWriter
	failed   bool
	onHeader func(http.Header)
	wrote    bool
	// lastWrite is when the response's last write began: the client cannot
	// have read the end of the response before it.
	lastWrite time.Time
}

// completedAt is when the last write of the response began.
func (w *trackingWriter) completedAt() time.Time {
	if w.lastWrite.IsZero() {
		return time.Now()
	}
	return w.lastWrite
}

func (w *trackingWriter) WriteHeader(code int) {
	w.header()
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) header() {
	if !w.wrote {
		w.wrote = true
		if w.onHeader != nil {
			w.onHeader(w.ResponseWriter.Header())
		}
	}
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.header()
	w.lastWrite = time.Now()
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *trackingWriter) Flush() {
	w.header()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scalarID: a JSON-RPC request id, a string or a number.
func scalarID(id json.RawMessage) bool {
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))
}
