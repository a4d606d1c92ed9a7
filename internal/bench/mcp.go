package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// target is the HTTP API both tools/call paths end at: it honours
// Idempotency-Key and answers a status endpoint per key.
type target struct {
	URL  string
	srv  *http.Server
	n    atomic.Int64
	mu   sync.Mutex
	done map[string]string
}

func startTarget() (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &target{URL: "http://" + ln.Addr().String(), done: map[string]string{}}
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := strings.CutPrefix(r.URL.Path, "/status/"); ok {
			t.mu.Lock()
			ans, ok := t.done[key]
			t.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, ans)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		t.mu.Lock()
		ans, again := t.done[key]
		if !again {
			ans = fmt.Sprintf(`{"release":"r-%d","key":%q}`, t.n.Add(1), key)
			if key != "" {
				t.done[key] = ans
			}
		}
		t.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, ans)
	})}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *target) close() { _ = t.srv.Close() }

// directMCP is what an agent would call without Portcullis: a Go SDK MCP
// server (Streamable HTTP, stateless, as /mcp serves 2026-07-28 clients)
// whose deploy_release tool POSTs to the same target.
type directMCP struct {
	URL string
	srv *http.Server
}

type deployIn struct {
	ReleaseID string `json:"release_id"`
}

func startDirectMCP(tg *target) (*directMCP, error) {
	hc := httpClient()
	s := sdk.NewServer(&sdk.Implementation{Name: "direct-target", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "deploy_release", Description: "Deploy a release"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in deployIn) (*sdk.CallToolResult, any, error) {
			body, _ := json.Marshal(in)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/releases", bytes.NewReader(body))
			if err != nil {
				return nil, nil, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return nil, nil, err
			}
			out, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(out)}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	d := &directMCP{URL: "http://" + ln.Addr().String() + "/mcp", srv: &http.Server{Handler: h}}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

func (d *directMCP) close() { _ = d.srv.Close() }

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// sessions opens one Go SDK client session per caller, each with its own
// transport (its own agent process).
func sessions(ctx context.Context, endpoint string, n int) ([]*sdk.ClientSession, error) {
	out := make([]*sdk.ClientSession, n)
	for i := range out {
		c := sdk.NewClient(&sdk.Implementation{Name: "bench-agent", Version: "1"}, nil)
		s, err := c.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{agentToken, httpClient().Transport}}, MaxRetries: -1,
		}, nil)
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
	tg, err := startTarget()
	if err != nil {
		return nil, nil, err
	}
	d, err := startDirectMCP(tg)
	if err != nil {
		tg.close()
		return nil, nil, err
	}
	ss, err := sessions(ctx, d.URL, callers)
	if err != nil {
		d.close()
		tg.close()
		return nil, nil, err
	}
	return func(ctx context.Context, c, i int) error { return callTool(ctx, ss[c], i) },
		func() { closeSessions(ss); d.close(); tg.close() }, nil
}

// mcpPortcullis: tools/call through /mcp (Begin, dispatch, target, result, delivered).
func mcpPortcullis(ctx context.Context, callers int) (opFunc, func(), error) {
	tg, err := startTarget()
	if err != nil {
		return nil, nil, err
	}
	g, err := startGW(ctx, mcpConfig(tg.URL), nil, "")
	if err != nil {
		tg.close()
		return nil, nil, err
	}
	ss, err := sessions(ctx, "http://"+g.Addr+"/mcp", callers)
	if err != nil {
		g.close()
		tg.close()
		return nil, nil, err
	}
	return func(ctx context.Context, c, i int) error { return callTool(ctx, ss[c], i) },
		func() { closeSessions(ss); g.close(); tg.close() }, nil
}
