package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/server"
)

// One call sent concurrently by several agents' sessions through two
// gateways sharing the ledger: the counting target receives exactly one
// request, and every caller gets the one execution's answer (completed,
// or honestly in flight), never a second send.
func TestMCPConcurrentCallTwoGatewaysOneEffect(t *testing.T) {
	tg := newTarget(t)
	tg.delay.Store(int64(150 * time.Millisecond))
	cfg := mcpConfig(t, tg)
	g1 := startMCPGateway(t, cfg, "")
	g2 := startMCPGateway(t, cfg, g1.NatsURL)
	const perGateway = 4
	var sessions []*sdk.ClientSession
	for _, g := range []*server.Gateway{g1, g2} {
		for range perGateway {
			s, err := mcpSession(t, g, agentToken)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			sessions = append(sessions, s)
		}
	}
	// Each caller builds its own params: the SDK writes into a call's _meta.
	params := func() *sdk.CallToolParams {
		return &sdk.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"release_id": "2026.08.01"},
			Meta: sdk.Meta{"io.portcullis/intent-scope": "run:concurrent"}}
	}
	start := make(chan struct{})
	recs := make([]map[string]any, len(sessions))
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := s.CallTool(context.Background(), params())
			if err != nil {
				errs[i] = err
				return
			}
			if m, ok := r.StructuredContent.(map[string]any); ok {
				recs[i] = m
			} else {
				errs[i] = fmt.Errorf("no structured content: %+v", r)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := tg.seen.Load(); n != 1 {
		t.Fatalf("the target received %d requests for one call, want 1", n)
	}
	var id any
	for i, rec := range recs {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if rec["state"] != "completed" && rec["state"] != "in_flight" {
			t.Fatalf("caller %d: %+v", i, rec)
		}
		if id == nil {
			id = rec["execution_id"]
		}
		if rec["execution_id"] != id {
			t.Fatalf("caller %d got execution %v, caller 0 %v", i, rec["execution_id"], id)
		}
	}
}
