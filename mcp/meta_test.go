package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// The audit's cases: a malformed key of ours is refused, never read as
// absent.
func TestReadMeta(t *testing.T) {
	const id = "act_01J4K8J7DX7V0000000000000A"
	for _, c := range []struct {
		meta, want string // want: a part of the error; "" = accepted
	}{
		{`{"io.portcullis/operation-key":1001}`, `"io.portcullis/operation-key" must be a string, got a number`},
		{`{"io.portcullis/operation-key":null}`, `must be a string, got null`},
		{`{"io.portcullis/operation-key":""}`, `is empty`},
		{`{"io.portcullis/operation-key":["op"]}`, `got an array`},
		{`{"idempotency-key":true}`, `"idempotency-key" must be a string, got a boolean`},
		{`{"io.portcullis/operation-key":"a","idempotency-key":"b"}`, `send one operation key`},
		{`{"io.portcullis/intent-scope":{"a":1}}`, `"io.portcullis/intent-scope" must be a string, got an object`},
		{`{"io.portcullis/intent-scope":""}`, `is empty`},
		{`{"io.portcullis/intent-scope":"` + strings.Repeat("r", 513) + `"}`, `513 bytes, at most 512`},
		{`{"io.portcullis/ack":7}`, `got a number`},
		{`{"io.portcullis/ack":[]}`, `lists 0 execution ids`},
		{`{"io.portcullis/ack":["` + id + `",1]}`, `[1] must be an execution id`},
		{`{"io.portcullis/ack":"act_x"}`, `is not an execution id`},
		{`{"io.portcullis/ack":[` + strings.Repeat(`"`+id+`",`, maxAcks) + `"` + id + `"]}`, `lists 65 execution ids`},
		{`{"io.portcullis/operation_key":"op-1"}`, `unknown _meta key "io.portcullis/operation_key"`},
		{`{"io.portcullis/execution":{"execution_id":"` + id + `"}}`, `the gateway sets it on answers`},
		{`{"io.portcullis/operation-key":"op-1","io.portcullis/intent-scope":"run:5f8097","io.portcullis/ack":["` + id + `"]}`, ``},
		{`{"idempotency-key":"k-1","io.portcullis/operation-key":"k-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","x":1}`, ``},
		{`null`, ``},
	} {
		var meta map[string]any
		if err := json.Unmarshal([]byte(c.meta), &meta); err != nil {
			t.Fatal(err)
		}
		_, err := readMeta(meta)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%.80s: refused: %v", c.meta, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was recorded")):
			t.Errorf("%.80s: %v, want an error with %q", c.meta, err, c.want)
		}
	}
}

// FuzzCallMeta: a request's _meta is outside input. readMeta never
// panics; a key of ours that is present is either read as exactly the
// string it holds or the whole request is refused, never read as absent.
func FuzzCallMeta(f *testing.F) {
	f.Add([]byte(`{"io.portcullis/intent-scope":"run:5f8097","io.portcullis/operation-key":"op-1"}`), "s-1")
	f.Add([]byte(`{"io.portcullis/intent-scope":7,"io.portcullis/operation-key":{"a":1}}`), "")
	f.Add([]byte(`{"io.portcullis/operation-key":1001}`), "")
	f.Add([]byte(`{"io.portcullis/intent-scope":""}`), "s-2")
	f.Add([]byte(`{"io.portcullis/ack":["act_01J4K8J7DX7V0000000000000A"],"idempotency-key":"k"}`), "")
	f.Add([]byte(`{"io.portcullis/oops":"x"}`), "")
	f.Add([]byte(`null`), "")
	f.Fuzz(func(t *testing.T, raw []byte, session string) {
		var meta map[string]any
		if err := json.Unmarshal(raw, &meta); err != nil {
			return
		}
		cm, err := readMeta(meta)
		if err != nil {
			return
		}
		for k, v := range meta {
			if strings.HasPrefix(k, metaPrefix) && k != MetaOperationKey && k != MetaIntentScope && k != MetaAck {
				t.Fatalf("unknown key %q accepted", k)
			}
			if k == MetaAck {
				continue
			}
			if k == MetaOperationKey || k == MetaIdemKey || k == MetaIntentScope {
				if s, ok := v.(string); !ok || s == "" {
					t.Fatalf("%s: %v accepted", k, v)
				}
			}
		}
		if s, ok := meta[MetaIntentScope].(string); ok && (cm.intentScope != s || intentScope(config.Tool{Name: "deploy_release"}, cm.intentScope, session) != s) {
			t.Fatal("an explicit intent scope is not the one used")
		}
		op, _ := meta[MetaOperationKey].(string)
		if op == "" {
			op, _ = meta[MetaIdemKey].(string)
		}
		if cm.operationKey != op {
			t.Fatalf("operation key %q, sent %q", cm.operationKey, op)
		}
		if len(cm.acks) > maxAcks {
			t.Fatalf("%d acks", len(cm.acks))
		}
	})
}

// The SDK's path (prepare) refuses what the front door refuses: a batch,
// say, reaches the tool handler without the front door's check.
func TestPrepareRefusesMalformedMeta(t *testing.T) {
	tools := map[string]config.Tool{"deploy_release": {Name: "deploy_release", Channel: "http", Target: "http://127.0.0.1:1/deploys",
		Contract: contract.Contract{Retry: contract.StatusQuery}}}
	binder, err := toolcall.New(tools)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{binder: binder, tools: tools}
	call := func(meta map[string]any) (string, *sdk.CallToolResult) {
		in, refusal := g.prepare(callInput{actor: "agent-7", tool: tools["deploy_release"], args: json.RawMessage(`{"release_id":"r1"}`), meta: meta})
		return in.OperationKey, refusal
	}
	if _, r := call(map[string]any{MetaOperationKey: 1001.0}); r == nil || !r.IsError ||
		!strings.Contains(r.Content[0].(*sdk.TextContent).Text, "must be a string, got a number") {
		t.Fatalf("numeric operation key: %+v", r)
	}
	if _, r := call(map[string]any{MetaIntentScope: map[string]any{"a": 1.0}}); r == nil {
		t.Fatal("object intent scope accepted")
	}
	if op, r := call(map[string]any{MetaOperationKey: "op-1"}); r != nil || op != "op-1" {
		t.Fatalf("a good key: %q %+v", op, r)
	}
}
