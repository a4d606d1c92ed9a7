package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/executor"
)

// FuzzUpstreamResult: an upstream MCP server's tools/call result is
// outside input. Whatever the SDK decodes from it is stored as an answer
// whose body is valid UTF-8 within the result cap, status 1 exactly for a
// tool error, and a result the agent can read: the result's own JSON, or
// when over the cap its text cut and saying so.
func FuzzUpstreamResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}]}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"boom"}],"isError":true}`))
	f.Add([]byte(`{"content":[],"structuredContent":{"a":[1,2,{"b":null}]},"_meta":{"x":"\u00e9"}}`))
	f.Add([]byte(`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"` + strings.Repeat("é", executor.MaxResultBytes/2) + `"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var res sdk.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return
		}
		o := upstreamOutcome(&res)
		if o.Observed != executor.Answered {
			return // unmarshalable back: recorded as unknown, with the reason
		}
		if len(o.Body) > executor.MaxResultBytes || !utf8.ValidString(o.Body) {
			t.Fatalf("stored body: %d bytes, valid UTF-8 %v", len(o.Body), utf8.ValidString(o.Body))
		}
		if (o.Status == 1) != res.IsError {
			t.Fatalf("status %d for isError %v", o.Status, res.IsError)
		}
		var back sdk.CallToolResult // cut or not, the agent gets a result it can read
		if err := json.Unmarshal([]byte(o.Body), &back); err != nil {
			t.Fatalf("a stored body (cut %v) is not a result: %v", o.Truncated, err)
		}
		if back.IsError != res.IsError {
			t.Fatalf("stored isError %v, upstream's %v", back.IsError, res.IsError)
		}
	})
}
