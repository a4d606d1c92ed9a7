package mcp

import "testing"

// BenchmarkParseMessage is the front door's read of one tools/call as the
// Go SDK client sends it (2026-07-28: per-request _meta).
func BenchmarkParseMessage(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench-agent","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"deploy_release","arguments":{"release_id":"r-6"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		m := parseMessage(body)
		cm, err := m.readMeta()
		if m.Method != "tools/call" || m.declaresTasks() || err != nil || cm.acks != nil || m.jsonrpcID() != "7" {
			b.Fatal(m)
		}
	}
}
