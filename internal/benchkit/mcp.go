package benchkit

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

// HTTPClient keeps a connection per caller open (the default transport
// keeps 2 idle per host, so 64 callers would reconnect all the time).
func HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return &http.Client{Transport: t}
}

// Target is the HTTP API both tools/call paths end at: it honours
// Idempotency-Key and answers a status endpoint per key.
type Target struct {
	URL  string
	srv  *http.Server
	n    atomic.Int64
	mu   sync.Mutex
	done map[string]string
}

func StartTarget() (*Target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &Target{URL: "http://" + ln.Addr().String(), done: map[string]string{}}
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

func (t *Target) Close() { _ = t.srv.Close() }

// DirectMCP is what an agent would call without Portcullis: a Go SDK MCP
// server (Streamable HTTP, stateless, as /mcp serves 2026-07-28 clients)
// whose deploy_release tool POSTs to the same target.
type DirectMCP struct {
	URL string
	srv *http.Server
}

type deployIn struct {
	ReleaseID string `json:"release_id"`
}

func StartDirectMCP(tg *Target) (*DirectMCP, error) {
	hc := HTTPClient()
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
	d := &DirectMCP{URL: "http://" + ln.Addr().String() + "/mcp", srv: &http.Server{Handler: h}}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

func (d *DirectMCP) Close() { _ = d.srv.Close() }
