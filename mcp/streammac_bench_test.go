package mcp

import (
	"bytes"
	"testing"
)

// The MAC of a stored event is on every 2025-11-25 tools/call twice (the
// priming event and the response): sealing a 2 KiB response and opening it.
func BenchmarkStreamEventMAC(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 2048)
	for b.Loop() {
		m := sealEvent(testStreamsKey, "pc.mcp.s.t", "sess-1", "stream-1", 1, data)
		if _, err := openEvent(testStreamsKey, "sess-1", "stream-1", m.Header, m.Data); err != nil {
			b.Fatal(err)
		}
	}
}
