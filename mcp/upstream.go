package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	"github.com/portcullis-dev/portcullis/executor"
)

const upstreamConnectMax = 10 * time.Second

// upstream is an MCP server whose tools the gateway proxies. Each proxied
// tool still needs a contract in the config; the others are listed as
// unavailable, with the reason, and calling them is refused.
type upstream struct {
	cfg config.Upstream

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []*sdk.Tool
}

type credentialTransport struct{ ref string }

func (c credentialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.ref != "" {
		tok, err := executor.Credential(c.ref)
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens (or reuses) the session to the upstream.
func (u *upstream) connect(ctx context.Context) (*sdk.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		return u.session, nil
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "portcullis", Version: "0.1.0"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: u.cfg.URL, HTTPClient: &http.Client{Transport: credentialTransport{u.cfg.CredentialRef}},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.cfg.Name, err)
	}
	u.session = s
	return s, nil
}

func (u *upstream) drop(s *sdk.ClientSession) {
	u.mu.Lock()
	if u.session == s {
		u.session = nil
	}
	u.mu.Unlock()
	s.Close()
}

// openUpstreams connects to every upstream and lists its tools. An
// upstream that cannot be reached is logged; its contracted tools are
// still offered and their calls end NOT_SENT until it answers.
func (g *Gateway) openUpstreams(cfg *config.Config) {
	g.upstreams = map[string]*upstream{}
	for name, uc := range cfg.Upstreams {
		u := &upstream{cfg: uc}
		g.upstreams[name] = u
		ctx, cancel := context.WithTimeout(context.Background(), upstreamConnectMax)
		s, err := u.connect(ctx)
		if err == nil {
			var res *sdk.ListToolsResult
			if res, err = s.ListTools(ctx, nil); err == nil {
				u.tools = res.Tools
			}
		}
		cancel()
		if err != nil {
			g.log.Warn("upstream MCP server unavailable", "upstream", name, "err", err)
		}
	}
}

// MetaIdempotencyKey carries the execution id to an upstream MCP server in
// the call's _meta, as the Idempotency-Key header does to an HTTP target:
// the same on every resend of one execution. An upstream that dedupes by
// it is what `retry: idempotency_key` on a channel: mcp tool claims.
const MetaIdempotencyKey = "io.portcullis/idempotency-key"

// callUpstream sends one call to the upstream tool: the upstream's answer
// (an error result or a JSON-RPC error included) is the observed result.
// A session the upstream no longer knows (it restarted: 404, nothing was
// run) is opened again and the call sent once more.
func (g *Gateway) callUpstream(t config.Tool, id string, args []byte) executor.Outcome {
	u, ok := g.upstreams[t.Upstream]
	if !ok {
		return executor.Outcome{Observed: executor.NotSent, Reason: "no upstream named " + t.Upstream}
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = executor.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	params := &sdk.CallToolParams{Name: t.Name, Arguments: json.RawMessage(args), Meta: sdk.Meta{MetaIdempotencyKey: id}}
	for try := 0; ; try++ {
		s, err := u.connect(ctx)
		if err != nil {
			return executor.Outcome{Observed: executor.NotSent, Reason: "nothing was sent: " + err.Error()}
		}
		res, err := s.CallTool(ctx, params)
		if err == nil {
			return upstreamOutcome(res)
		}
		u.drop(s)
		var rpcErr *jsonrpc.Error
		switch {
		case errors.Is(err, sdk.ErrSessionMissing) && try == 0:
			continue // refused unread: the upstream did not know the session
		case errors.Is(err, sdk.ErrSessionMissing):
			return executor.Outcome{Observed: executor.NotSent, Reason: "the upstream refused the session twice (404), nothing was run: " + err.Error()}
		case errors.As(err, &rpcErr):
			return upstreamOutcome(&sdk.CallToolResult{IsError: true,
				Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("upstream error %d: %s", rpcErr.Code, rpcErr.Message)}}})
		}
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			why = "no answer within " + timeout.String()
		}
		return executor.Outcome{Observed: executor.Unknown, Reason: "the call was handed to the upstream, no answer: " + why}
	}
}

// upstreamOutcome is the stored form of an upstream's CallToolResult:
// status 1 for a tool error, 0 otherwise, the result's JSON as the body.
// A result over the cap is stored as a result still (its text cut, and
// saying so), never as a cut JSON fragment an agent could not read.
func upstreamOutcome(res *sdk.CallToolResult) executor.Outcome {
	body, err := json.Marshal(res)
	if err != nil {
		return executor.Outcome{Observed: executor.Unknown, Reason: "unreadable upstream answer: " + err.Error()}
	}
	status := 0
	if res.IsError {
		status = 1
	}
	o := executor.Outcome{Observed: executor.Answered, Status: status, ContentType: mcpResultType}
	if len(body) <= executor.MaxResultBytes {
		o.Body = string(body)
		return o
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	note := fmt.Sprintf("\n[truncated: the upstream's answer was %d bytes; the ledger keeps %d]", len(body), executor.MaxResultBytes)
	kept, _ := executor.ResultText([]byte(text.String()))
	for {
		cut, err := json.Marshal(&sdk.CallToolResult{IsError: res.IsError, Content: []sdk.Content{&sdk.TextContent{Text: kept + note}}})
		if err != nil {
			return executor.Outcome{Observed: executor.Unknown, Reason: "unreadable upstream answer: " + err.Error()}
		}
		if len(cut) <= executor.MaxResultBytes || kept == "" {
			o.Body, o.Truncated = string(cut), true
			return o
		}
		kept = executor.CutText(kept, max(len(kept)-(len(cut)-executor.MaxResultBytes)-1, 0))
	}
}

// mcpResultType marks a stored result that is an upstream CallToolResult.
const mcpResultType = "application/vnd.mcp.call-tool-result+json"

// Close stops appending DELIVERED (waiting for the appends in flight) and
// ends the sessions to the upstreams. The gateway's server calls it after
// the HTTP server shut down and before the ledger closes.
func (g *Gateway) Close() {
	g.delivery.close()
	for _, u := range g.upstreams {
		u.mu.Lock()
		s := u.session
		u.session = nil
		u.mu.Unlock()
		if s != nil {
			s.Close()
		}
	}
}

// upstreamExecutor is the driver's executor for channel: mcp tools.
type upstreamExecutor struct{ g *Gateway }

var _ dispatch.Executor = upstreamExecutor{}

func (u upstreamExecutor) Send(t config.Tool, id string, args []byte) executor.Outcome {
	return u.g.callUpstream(t, id, args)
}

// Status: an upstream MCP server has no status query.
func (upstreamExecutor) Status(context.Context, config.Tool, string) dispatch.Status {
	return dispatch.Status{Evidence: "an upstream MCP server has no status query"}
}
