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
	f.Add([]byte(`{"id":3,"method":"tools/call","params":{"_meta":{"io.portcullis\/ack":"act_1"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m := parseMessage(body)
		if len(m.acks()) > maxAcks {
			t.Fatalf("%d acks, limit %d", len(m.acks()), maxAcks)
		}
		// The raw _meta's shortcut never misses what a full decode finds.
		full := m.meta()
		if _, ok := full[MetaAck]; ok && !m.metaHas(MetaAck) {
			t.Fatalf("ack in %s missed", m.Params.Meta)
		}
		caps, _ := full[metaClientCaps].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext[ExtTasks]; ok != m.declaresTasks() {
			t.Fatalf("declaresTasks %v for %s", !ok, m.Params.Meta)
		}
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
	// A key written with escapes is still read.
	if e := parseMessage([]byte(`{"jsonrpc":"2.0","id":null,"method":"ping","params":{"_meta":{"io.portcullis\u002fack":["act_1","act_2"]}}}`)); len(e.acks()) != 2 || e.jsonrpcID() != "" {
		t.Fatalf("escaped key: %+v", e)
	}
	// A _meta that is not an object is not routed (the SDK refuses it).
	if e := parseMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":"x"}}`)); e.Method != "" {
		t.Fatalf("non-object _meta: %+v", e)
	}
	// The client's own _meta keys are not ours: nothing to acknowledge.
	if c := parseMessage([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}}`)); c.acks() != nil || c.declaresTasks() || c.meta() == nil {
		t.Fatalf("client meta: %+v", c)
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
