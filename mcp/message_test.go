package mcp

import (
	"strings"
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
		cm, err := m.readMeta()
		if err == nil && len(cm.acks) > maxAcks {
			t.Fatalf("%d acks, limit %d", len(cm.acks), maxAcks)
		}
		// The raw _meta's shortcuts never miss what a full decode finds.
		full := m.meta()
		if _, ok := full[MetaAck]; ok && !m.metaHas(MetaAck) {
			t.Fatalf("ack in %s missed", m.Params.Meta)
		}
		for k := range full {
			if (strings.HasPrefix(k, metaPrefix) || k == MetaIdemKey) && !m.metaMayBeOurs() {
				t.Fatalf("key %q in %s missed", k, m.Params.Meta)
			}
		}
		if _, ferr := readMeta(full); (ferr == nil) != (err == nil) {
			t.Fatalf("readMeta %v, on the full decode %v, for %s", err, ferr, m.Params.Meta)
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
	const id1, id2 = "act_01J4K8J7DX7V0000000000000A", "act_01J4K8J7DX7V0000000000000B"
	m := parseMessage([]byte(`{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"x","_meta":{"io.portcullis/ack":"` + id1 + `","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`))
	if cm, err := m.readMeta(); m.Method != "tools/call" || m.Params.Name != "x" || m.jsonrpcID() != "req-7" || !m.declaresTasks() || err != nil || len(cm.acks) != 1 {
		t.Fatalf("%+v %+v %v", m, cm, err)
	}
	if n := parseMessage([]byte(`{"jsonrpc":"2.0","id":12,"method":"ping"}`)); n.jsonrpcID() != "12" || n.declaresTasks() {
		t.Fatalf("%+v", n)
	}
	// A key written with escapes is still read.
	e := parseMessage([]byte(`{"jsonrpc":"2.0","id":null,"method":"ping","params":{"_meta":{"io.portcullis\u002fack":["` + id1 + `","` + id2 + `"]}}}`))
	if cm, err := e.readMeta(); err != nil || len(cm.acks) != 2 || e.jsonrpcID() != "" {
		t.Fatalf("escaped key: %+v %+v %v", e, cm, err)
	}
	// ... and so is a malformed one: refused, not skipped.
	if _, err := parseMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.portcullis\u002foperation-key":7}}}`)).readMeta(); err == nil {
		t.Fatal("an escaped malformed operation key was not refused")
	}
	// A _meta that is not an object is not routed (the SDK refuses it).
	if e := parseMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":"x"}}`)); e.Method != "" {
		t.Fatalf("non-object _meta: %+v", e)
	}
	// The client's own _meta keys are not ours: nothing to acknowledge.
	if c := parseMessage([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}}`)); c.metaMayBeOurs() || c.declaresTasks() || c.meta() == nil {
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
