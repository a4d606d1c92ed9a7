package test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
)

// BenchmarkMCPToolsCall: tools/call from 64 concurrent Go SDK clients.
// direct: an MCP server (Go SDK, Streamable HTTP, stateless) whose
// deploy_release tool POSTs to the local HTTP target, what an agent would
// call without Portcullis; through-portcullis: /mcp → Begin → DISPATCHED →
// the same target → result → delivered.
func BenchmarkMCPToolsCall(b *testing.B) {
	call := func(sessions []*sdk.ClientSession) func(c, i int) error {
		return func(c, i int) error {
			r, err := sessions[c].CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": fmt.Sprintf("m-%d", i)}})
			if err == nil && r.IsError {
				err = fmt.Errorf("tool error: %v", r.Content)
			}
			return err
		}
	}
	b.Run("direct", func(b *testing.B) {
		tg, err := benchkit.StartTarget()
		if err != nil {
			b.Fatal(err)
		}
		defer tg.Close()
		d, err := benchkit.StartDirectMCP(tg)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		sessions := make([]*sdk.ClientSession, 64)
		for i := range sessions {
			c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
			s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
				Endpoint: d.URL, HTTPClient: &http.Client{Transport: agentTransport(agentToken)}, MaxRetries: -1,
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sessions[i] = s
		}
		runCallersUnit(b, 64, "calls/s", call(sessions))
	})
	b.Run("through-portcullis", func(b *testing.B) {
		g := startMCPGatewayB(b, mcpConfigB(b, newTargetB(b)))
		sessions := make([]*sdk.ClientSession, 64)
		for i := range sessions {
			s, err := mcpSessionB(g)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sessions[i] = s
		}
		runCallersUnit(b, 64, "calls/s", call(sessions))
	})
}
