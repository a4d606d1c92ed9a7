package test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPToolsCall: tools/call end to end (Go SDK client → /mcp →
// Begin → DISPATCHED → HTTP target → result → delivered) at 64 concurrent
// clients, against calling the same local target directly.
func BenchmarkMCPToolsCall(b *testing.B) {
	tg := newTargetB(b)
	b.Run("direct", func(b *testing.B) {
		runCallers(b, 64, func(_, i int) error {
			resp, err := http.Post(tg.URL+"/releases", "application/json", bytes.NewReader([]byte(fmt.Sprintf(`{"release_id":"d-%d"}`, i))))
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	})
	b.Run("through-portcullis", func(b *testing.B) {
		g := startMCPGatewayB(b, mcpConfigB(b, tg))
		sessions := make([]*sdk.ClientSession, 64)
		for i := range sessions {
			s, err := mcpSessionB(g)
			if err != nil {
				b.Fatal(err)
			}
			sessions[i] = s
		}
		defer func() {
			for _, s := range sessions {
				s.Close()
			}
		}()
		runCallers(b, 64, func(c, i int) error {
			r, err := sessions[c].CallTool(context.Background(), &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": fmt.Sprintf("m-%d", i)}})
			if err == nil && r.IsError {
				err = fmt.Errorf("tool error: %v", r.Content)
			}
			return err
		})
	})
}
