package main

import (
	"context"
	"fmt"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
)

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// The protocol versions the tools/call clients speak: the SDK's latest
// (2026-07-28: stateless requests, no session), and 2025-11-25, a
// stateful session whose responses stream as SSE and are kept for
// resumption (the response event store is on their path).
const (
	latestMCP  = ""
	sessionMCP = "2025-11-25"
)

// sessions opens one Go SDK client session per caller, each with its own
// transport (its own agent process), speaking protocol version.
func sessions(ctx context.Context, endpoint string, n int, version string) ([]*sdk.ClientSession, error) {
	out := make([]*sdk.ClientSession, n)
	for i := range out {
		c := sdk.NewClient(&sdk.Implementation{Name: "bench-agent", Version: "1"}, nil)
		s, err := c.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{agentToken, httpClient().Transport}}, MaxRetries: -1,
		}, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			closeSessions(out[:i])
			return nil, fmt.Errorf("mcp connect: %w", err)
		}
		out[i] = s
	}
	return out, nil
}

func closeSessions(ss []*sdk.ClientSession) {
	for _, s := range ss {
		_ = s.Close()
	}
}

func callTool(ctx context.Context, s *sdk.ClientSession, i int) error {
	r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": fmt.Sprintf("r-%d", i)}})
	if err == nil && r.IsError {
		err = fmt.Errorf("tool error: %v", r.Content)
	}
	return err
}

// mcpDirect: tools/call on the direct MCP server.
func mcpDirect(ctx context.Context, callers int) (opFunc, func(), error) {
	tg, err := benchkit.StartTarget()
	if err != nil {
		return nil, nil, err
	}
	d, err := benchkit.StartDirectMCP(tg)
	if err != nil {
		tg.Close()
		return nil, nil, err
	}
	ss, err := sessions(ctx, d.URL, callers, latestMCP)
	if err != nil {
		d.Close()
		tg.Close()
		return nil, nil, err
	}
	return func(ctx context.Context, c, i int) error { return callTool(ctx, ss[c], i) },
		func() { closeSessions(ss); d.Close(); tg.Close() }, nil
}

// mcpPortcullis: tools/call through /mcp (Begin, dispatch, target, result,
// delivered), by clients speaking protocol version (latestMCP or
// sessionMCP).
func mcpPortcullis(version string) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		tg, err := benchkit.StartTarget()
		if err != nil {
			return nil, nil, err
		}
		g, err := startGW(ctx, mcpConfig(tg.URL), nil, "")
		if err != nil {
			tg.Close()
			return nil, nil, err
		}
		ss, err := sessions(ctx, "http://"+g.Addr+"/mcp", callers, version)
		if err != nil {
			g.close()
			tg.Close()
			return nil, nil, err
		}
		return func(ctx context.Context, c, i int) error { return callTool(ctx, ss[c], i) },
			func() { closeSessions(ss); g.close(); tg.Close() }, nil
	}
}
