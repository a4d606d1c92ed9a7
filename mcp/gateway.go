// Package mcp is the agents' door: an MCP Streamable HTTP endpoint (the
// official go-sdk) whose every tools/call goes through the ledger's Begin
// and then does exactly what the recovery table says. What an agent gets
// back on a retry is the stored result or a clear state (outcome_unknown,
// awaiting_approval, needs_review, denied) with the execution id, the first
// dispatch time and why nothing was resent; never a made-up error.
package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/executor"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// _meta keys an agent may send with tools/call.
const (
	MetaIntentScope  = "io.portcullis/intent-scope"
	MetaOperationKey = "io.portcullis/operation-key"
	MetaIdemKey      = "idempotency-key" // what commerce MCP servers already use
	MetaExecution    = "io.portcullis/execution"
)

// Limits of the endpoint.
const (
	MaxRequestBytes = 1 << 20
	waitMax         = 20 * time.Second // how long an attached call waits for an in-flight execution
	requestHeader   = "X-Portcullis-Request"
	// maxTrackedSessions bounds the session → actor map of the journal.
	maxTrackedSessions = 1 << 16
)

// Gateway serves /mcp.
type Gateway struct {
	ledger *ledger.Service
	tools  map[string]config.Tool
	agents map[string]string // sha256(token) → actor
	http   *executor.HTTP
	ssh    executor.SSH
	log    *slog.Logger
	locked bool // the vault is locked: every action is refused

	upstreams map[string]*upstream
	events    sdk.EventStore
	journal   *Journal

	schemas map[string]*jsonschema.Resolved

	mu            sync.Mutex
	pending       map[string][]string // request nonce → executions whose result that request carries
	sessionActors map[string]string   // MCP session id → the actor its requests authenticated as
	sessionRemote map[string]string   // MCP session id → the remote address of its connection
	local         map[string]bool     // sessions this gateway holds
	owners        SessionOwners
	self          string
}

// New builds the gateway from the config's tools and agents. Response
// streams are kept in events (nil: in memory).
func New(l *ledger.Service, cfg *config.Config, events sdk.EventStore, journal *Journal, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{ledger: l, tools: map[string]config.Tool{}, agents: cfg.Agents, http: executor.NewHTTP(), log: log, locked: cfg.VaultLocked,
		schemas: map[string]*jsonschema.Resolved{}, pending: map[string][]string{}, events: events, journal: journal, sessionActors: map[string]string{}, sessionRemote: map[string]string{}, local: map[string]bool{}}
	for name, t := range cfg.Tools {
		if t.Channel == "" {
			continue // contract only: run by outside executors through the Connect API
		}
		schema := &jsonschema.Schema{Type: "object"}
		if len(t.InputSchema) > 0 {
			schema = new(jsonschema.Schema)
			if err := json.Unmarshal(t.InputSchema, schema); err != nil {
				return nil, fmt.Errorf("tool %s: input_schema: %w", name, err)
			}
		}
		rs, err := schema.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input_schema: %w", name, err)
		}
		g.tools[name], g.schemas[name] = t, rs
	}
	g.openUpstreams(cfg)
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
			if ct, ok := g.tools[ut.Name]; ok && ct.Upstream == uname {
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

// Handler is the /mcp endpoint: bearer authentication, then the SDK's
// Streamable HTTP transport, then delivery tracking.
func (g *Gateway) Handler() http.Handler {
	srv := g.server()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxRequestBytes, Logger: g.log, EventStore: g.events,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := g.actor(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis"`)
			http.Error(w, `{"error":"missing or unknown bearer token"}`, http.StatusUnauthorized)
			return
		}
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			if g.forward(w, r, sid) {
				return
			}
			g.mu.Lock()
			if len(g.sessionActors) < maxTrackedSessions {
				g.sessionActors[sid] = actor
				g.sessionRemote[sid] = r.RemoteAddr
			}
			g.mu.Unlock()
		}
		nonce := ulid.Make().String()
		r.Header.Set(requestHeader, nonce)
		tw := &trackingWriter{ResponseWriter: w}
		h.ServeHTTP(tw, r)
		g.delivered(nonce, tw.failed || r.Context().Err() != nil)
	})
}

// actor authenticates the caller; the actor never comes from the body.
func (g *Gateway) actor(h http.Header) (string, bool) {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	a, ok := g.agents[hex.EncodeToString(sum[:])]
	return a, ok
}

// trackingWriter notes whether writing the response failed.
type trackingWriter struct {
	http.ResponseWriter
	failed bool
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *trackingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// carry notes that the response to request nonce carries execution id's result.
func (g *Gateway) carry(nonce, id string) {
	if nonce == "" {
		return
	}
	g.mu.Lock()
	g.pending[nonce] = append(g.pending[nonce], id)
	g.mu.Unlock()
}

// delivered marks the executions whose results the response carried as
// delivered, unless writing it failed: then they stay
// COMPLETED_RESULT_NOT_DELIVERED and a retry collects them.
func (g *Gateway) delivered(nonce string, failed bool) {
	g.mu.Lock()
	ids := g.pending[nonce]
	delete(g.pending, nonce)
	g.mu.Unlock()
	if failed {
		return
	}
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := g.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_DELIVERED})
		cancel()
		var ite *ledger.IllegalTransitionError
		if err != nil && !errors.As(err, &ite) {
			g.log.Warn("mark delivered", "execution", id, "err", err)
		}
	}
}

func metaString(m map[string]any, key string) string {
	if v, ok := m[key].(string); ok {
		return v
	}
	return ""
}

// call handles tools/call for one tool.
func (g *Gateway) call(t config.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		actor, ok := g.actor(req.Extra.Header)
		if !ok {
			return nil, errors.New("unauthenticated")
		}
		if g.locked {
			return refused("the vault is locked: no action is taken; nothing was recorded or sent"), nil
		}
		args := []byte(req.Params.Arguments)
		if len(args) == 0 {
			args = []byte("{}")
		}
		var inst any
		if err := json.Unmarshal(args, &inst); err != nil {
			return refused("arguments are not JSON: " + err.Error()), nil
		}
		if err := g.schemas[t.Name].Validate(inst); err != nil {
			return refused("arguments do not match the tool's input schema: " + err.Error() + "; nothing was recorded or sent"), nil
		}
		meta := req.Params.GetMeta()
		session := ""
		if req.Session != nil {
			session = req.Session.ID()
		}
		scope := metaString(meta, MetaIntentScope)
		if scope == "" {
			scope = "session:" + session
		}
		opKey := metaString(meta, MetaOperationKey)
		if opKey == "" {
			opKey = metaString(meta, MetaIdemKey)
		}
		in := ledger.BeginInput{
			Action: fingerprint.Action{Actor: actor, Tool: t.Name, Channel: t.Channel, Target: t.Target,
				CredentialRef: t.CredentialRef, Method: t.Method, Arguments: args, IntentScope: scope},
			OperationKey: opKey,
			Correlation:  &pb.Correlation{SessionId: session},
		}
		nonce := req.Extra.Header.Get(requestHeader)
		return g.run(ctx, t, in, args, nonce, 0)
	}
}

// run begins and acts on the decision.
func (g *Gateway) run(ctx context.Context, t config.Tool, in ledger.BeginInput, args []byte, nonce string, depth int) (*sdk.CallToolResult, error) {
	res, err := g.ledger.Begin(ctx, in)
	if err != nil {
		return refused("refused: " + err.Error() + "; nothing was sent"), nil
	}
	x := res.Execution
	g.carry(nonce, x.GetExecutionId())
	if res.Decision == pb.Decision_DECISION_NEW {
		switch x.GetState() {
		case pb.State_STATE_AWAITING_APPROVAL:
			return stateResult("awaiting_approval", x, "the tool needs a person's approval for every use; nothing was sent"), nil
		case pb.State_STATE_DENIED:
			return stateResult("denied", x, x.GetReason()), nil
		}
		return g.dispatch(ctx, t, x, args)
	}
	switch res.Recovery {
	case pb.Recovery_RECOVERY_RESUME, pb.Recovery_RECOVERY_RESEND_SAME_KEY:
		return g.dispatch(ctx, t, x, args)
	case pb.Recovery_RECOVERY_AWAIT_APPROVAL:
		return stateResult("awaiting_approval", x, res.Reason), nil
	case pb.Recovery_RECOVERY_WAIT:
		return g.wait(ctx, x, res.Reason)
	case pb.Recovery_RECOVERY_QUERY_STATUS:
		return g.queryStatus(ctx, t, in, args, x, nonce, depth)
	case pb.Recovery_RECOVERY_NEEDS_REVIEW:
		return stateResult("needs_review", x, res.Reason), nil
	case pb.Recovery_RECOVERY_RETURN_RESULT:
		return storedResult(x, "returned the stored result of "+x.GetExecutionId()+"; nothing was sent"), nil
	case pb.Recovery_RECOVERY_RETURN_DENIAL:
		return stateResult("denied", x, res.Reason+": "+x.GetReason()), nil
	}
	return stateResult(strings.ToLower(strings.TrimPrefix(x.GetState().String(), "STATE_")), x, res.Reason), nil
}

// dispatch wins DISPATCHED (or learns who did), sends, records what it
// observed, and answers. The send runs to its own deadline: an agent that
// goes away does not cancel it, and its retry collects the result.
func (g *Gateway) dispatch(ctx context.Context, t config.Tool, x *pb.Execution, args []byte) (*sdk.CallToolResult, error) {
	id := x.GetExecutionId()
	if _, err := g.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_DISPATCHED}); err != nil {
		var ite *ledger.IllegalTransitionError
		if errors.As(err, &ite) {
			return g.wait(ctx, x, "another call dispatched it first; nothing was resent")
		}
		return refused("not dispatched: " + err.Error()), nil
	}
	done := make(chan *pb.Execution, 1)
	go func() { done <- g.record(id, g.send(t, id, args)) }()
	select {
	case rx := <-done:
		if rx == nil {
			return g.wait(ctx, x, "the observation could not be recorded")
		}
		switch rx.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED:
			return storedResult(rx, ""), nil
		case pb.State_STATE_NOT_SENT:
			return stateResult("not_sent", rx, rx.GetReason()+"; a retry resumes this execution"), nil
		default:
			return stateResult("outcome_unknown", rx, rx.GetReason()+"; nothing was resent"), nil
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send performs one attempt on the tool's channel.
func (g *Gateway) send(t config.Tool, id string, args []byte) executor.Outcome {
	if t.Channel == "mcp" {
		return g.callUpstream(t, args)
	}
	if t.Channel != "ssh" {
		return g.http.Do(executor.HTTPRequest{Method: t.Method, URL: t.Target, Body: args, ExecutionID: id,
			IdemHeader: t.IdempotencyHeader, CredentialRef: t.CredentialRef, Timeout: t.Timeout})
	}
	r := sshRequest(t, id, args)
	o := g.ssh.Do(r)
	if o.Observed != executor.Unknown {
		return o
	}
	// The connection dropped: ask the marker before anything else.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch m, code, out, err := g.ssh.Ask(ctx, r); {
	case err != nil:
		o.Reason += "; the marker could not be asked: " + err.Error()
	case m == executor.MarkerDone:
		return executor.Outcome{Observed: executor.Answered, Status: code, Body: out, ContentType: "text/plain"}
	case m == executor.MarkerAbsent:
		return executor.Outcome{Observed: executor.NotSent, Reason: "the remote marker shows the command never started"}
	}
	return o
}

func sshRequest(t config.Tool, id string, args []byte) executor.SSHRequest {
	return executor.SSHRequest{Target: t.Target, HostKey: t.HostKey, CredentialRef: t.CredentialRef, Command: t.Command,
		ExecutionID: id, Stdin: args, Timeout: t.Timeout}
}

// record appends what an attempt observed.
func (g *Gateway) record(id string, o executor.Outcome) *pb.Execution {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := ledger.Change{ExecutionID: id}
	switch o.Observed {
	case executor.Answered:
		ch.Event = pb.EventType_EVENT_TYPE_RESULT_OBSERVED
		ch.Apply = func(x *pb.Execution) {
			x.TargetStatus, x.ResultBody, x.ResultContentType = int32(o.Status), o.Body, o.ContentType
			x.ResultReference = "result_" + id[len("act_"):]
		}
	case executor.NotSent:
		ch.Event = pb.EventType_EVENT_TYPE_NOT_SENT
		ch.Apply = func(x *pb.Execution) { x.Reason = o.Reason }
	default:
		ch.Event = pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN
		ch.Apply = func(x *pb.Execution) { x.Reason = o.Reason }
	}
	x, err := g.ledger.Transition(ctx, ch)
	if err != nil {
		g.log.Error("record observation", "execution", id, "err", err)
		return nil
	}
	return x
}

// wait follows an in-flight execution until it leaves DISPATCHED (bounded).
func (g *Gateway) wait(ctx context.Context, x *pb.Execution, why string) (*sdk.CallToolResult, error) {
	deadline := time.Now().Add(waitMax)
	for time.Now().Before(deadline) {
		cur, err := g.ledger.Get(ctx, x.GetExecutionId())
		if err != nil {
			return nil, err
		}
		switch cur.GetState() {
		case pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED, pb.State_STATE_DELIVERED:
			return storedResult(cur, "attached to "+cur.GetExecutionId()+"; "+why), nil
		case pb.State_STATE_OUTCOME_UNKNOWN:
			return stateResult("outcome_unknown", cur, cur.GetReason()+"; nothing was resent"), nil
		case pb.State_STATE_DISPATCHED, pb.State_STATE_ACCEPTED, pb.State_STATE_AUTHORIZED:
		default:
			return stateResult(strings.ToLower(strings.TrimPrefix(cur.GetState().String(), "STATE_")), cur, why), nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return stateResult("in_flight", x, "the first call is still at the target; nothing was resent; ask again later"), nil
}

// queryStatus asks the target's status endpoint about an unknown outcome
// and resolves it; a proven absence lets the call run as a new execution.
func (g *Gateway) queryStatus(ctx context.Context, t config.Tool, in ledger.BeginInput, args []byte, x *pb.Execution, nonce string, depth int) (*sdk.CallToolResult, error) {
	id := x.GetExecutionId()
	var o executor.Outcome
	switch {
	case t.Channel == "ssh":
		m, code, out, err := g.ssh.Ask(ctx, sshRequest(t, id, nil))
		switch {
		case err != nil:
			return stateResult("outcome_unknown", x, "the remote marker could not be asked ("+err.Error()+"); nothing was resent"), nil
		case m == executor.MarkerRunning:
			return stateResult("in_flight", x, "the remote marker shows the command still running; nothing was resent"), nil
		case m == executor.MarkerAbsent:
			o = executor.Outcome{Observed: executor.Answered, Status: http.StatusNotFound}
		default:
			return g.resolveCompleted(ctx, x, code, out, "the remote marker shows exit status "+fmt.Sprint(code))
		}
	case t.StatusURL == "":
		return stateResult("outcome_unknown", x, "the contract names no status_url; nothing was resent"), nil
	default:
		o = g.http.Do(executor.HTTPRequest{Method: http.MethodGet, URL: executor.StatusURL(t.StatusURL, id), ExecutionID: id,
			IdemHeader: t.IdempotencyHeader, CredentialRef: t.CredentialRef, Timeout: t.Timeout})
	}
	switch {
	case o.Observed == executor.Answered && o.Status >= 200 && o.Status < 300:
		return g.resolveCompleted(ctx, x, o.Status, o.Body, "the status endpoint answered "+fmt.Sprint(o.Status))
	case o.Observed == executor.Answered && o.Status == http.StatusNotFound && depth == 0:
		if _, err := g.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED,
			Evidence: "absence proven (status 404 or no remote marker)"}); err != nil {
			return g.wait(ctx, x, "resolved by another call")
		}
		return g.run(ctx, t, in, args, nonce, depth+1)
	}
	return stateResult("outcome_unknown", x, "the status endpoint did not settle it ("+fmt.Sprint(o.Status)+" "+o.Reason+"); nothing was resent"), nil
}

// resolveCompleted settles an unknown outcome as completed with the
// evidence found, and returns the result.
func (g *Gateway) resolveCompleted(ctx context.Context, x *pb.Execution, status int, body, evidence string) (*sdk.CallToolResult, error) {
	id := x.GetExecutionId()
	rx, err := g.ledger.Transition(ctx, ledger.Change{ExecutionID: id, Event: pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED,
		Evidence: evidence,
		Apply: func(x *pb.Execution) {
			x.TargetStatus, x.ResultBody = int32(status), body
			x.ResultReference = "result_" + id[len("act_"):]
		}})
	if err != nil {
		return g.wait(ctx, x, "resolved by another call")
	}
	return storedResult(rx, evidence+"; the first call took effect; nothing was resent"), nil
}
