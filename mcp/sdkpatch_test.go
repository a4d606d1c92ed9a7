package mcp

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestSDKDecodesWithoutAReadBuffer guards the patched SDK
// (third_party/go-sdk/PORTCULLIS.md): unpatched, every message the SDK
// decodes (about seven per tools/call at the front door) allocates and
// zeroes a 32 KiB read buffer, a fifth of a gateway's CPU per call.
func TestSDKDecodesWithoutAReadBuffer(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy_release","arguments":{"release_id":"r-1"}}}`)
	const runs = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		m, err := jsonrpc.DecodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := m.(*jsonrpc.Request); !ok || r.Method != "tools/call" {
			t.Fatalf("decoded %#v", m)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
		t.Errorf("decoding a %d-byte message allocated %d bytes; the SDK's patch (third_party/go-sdk) is not in use", len(msg), per)
	}
}
