package test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/server"
)

// A Connect answer below server.CompressMinBytes goes uncompressed even to
// a caller that accepts gzip (compressing a Begin's half kilobyte cost more
// CPU than it saved); a larger one, a page of executions, is still gzipped.
func TestConnectCompressesOnlyLargeResponses(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	blob := strings.Repeat("a", 2<<10)
	for i := range 8 {
		if _, err := c.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "r" + string(rune('a'+i)), "notes": blob}), "", "1")); err != nil {
			t.Fatal(err)
		}
	}
	post := func(method, body string) (encoding string, size int) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/portcullis.v1.ExecutionService/"+method, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport hands the body over as sent
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
		}
		return resp.Header.Get("Content-Encoding"), len(b)
	}
	if enc, n := post("Begin", `{"action": {"actor": "agent-7", "tool": "deploy_release", "arguments": {"release_id": "small"}}}`); enc != "" || n >= server.CompressMinBytes {
		t.Errorf("Begin's answer: Content-Encoding %q, %d bytes; want it sent as is", enc, n)
	}
	if enc, _ := post("ListExecutions", `{"pageSize": 100}`); enc != "gzip" {
		t.Errorf("a page of eight executions of 2 KiB arguments each: Content-Encoding %q; want gzip", enc)
	}
}
