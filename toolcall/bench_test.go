package toolcall_test

import (
	"testing"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// BenchmarkBind is one /mcp tools/call's binding: the fixed fields and the
// input_schema check of the bench's deploy_release tool.
func BenchmarkBind(b *testing.B) {
	tools := map[string]config.Tool{"deploy_release": {Name: "deploy_release", Channel: "http", Method: "POST", Target: "http://127.0.0.1:1/releases",
		InputSchema: []byte(`{"type":"object","properties":{"release_id":{"type":"string"}},"required":["release_id"]}`)}}
	bd, err := toolcall.New(tools)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"release_id":"r-12345"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bd.Bind(toolcall.Request{Actor: "agent-7", Tool: "deploy_release", Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
}
