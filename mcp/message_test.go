package mcp

import (
	"testing"
)

// The front door reads every POST body before the SDK does: whatever
// arrives, parsing must not panic and must stay within its bounds.
func FuzzParseMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy_release","arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"taskId":"act_01M8RBB7PNCFTAJPPRB8XMBSD9"}}`,
		`{"jsonrpc":"2.0","method":"notifications/io.portcullis/ack","params":{"_meta":{"io.portcullis/ack":["a","b"]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"id":`, `null`, `{"params":{"_meta":{"io.portcullis/ack":7}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m := parseMessage(body)
		if len(m.acks()) > maxAcks {
			t.Fatalf("%d acks, limit %d", len(m.acks()), maxAcks)
		}
		_ = m.declaresTasks()
		_ = m.jsonrpcID()
	})
}

func TestParseMessage(t *testing.T) {
	m := parseMessage([]byte(`{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"x","_meta":{"io.portcullis/ack":"act_1","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`))
	if m.Method != "tools/call" || m.Params.Name != "x" || m.jsonrpcID() != "req-7" || !m.declaresTasks() || len(m.acks()) != 1 {
		t.Fatalf("%+v", m)
	}
	if n := parseMessage([]byte(`{"jsonrpc":"2.0","id":12,"method":"ping"}`)); n.jsonrpcID() != "12" || n.declaresTasks() {
		t.Fatalf("%+v", n)
	}
}

// Event ids are the SDK's "<stream>_<index>"; anything else is ignored.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"abc_0", "abc_12", "_1", "a_b_c", "x_-1", "", "s_99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		stream, idx, ok := parseEventID(id)
		if ok && (stream == "" || idx < 0) {
			t.Fatalf("%q parsed as %q %d", id, stream, idx)
		}
	})
}
