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
// tool error, and (when not cut) the result's own JSON.
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
		if !o.Truncated {
			var back sdk.CallToolResult
			if err := json.Unmarshal([]byte(o.Body), &back); err != nil {
				t.Fatalf("an uncut stored body is not a result: %v", err)
			}
		}
	})
}
