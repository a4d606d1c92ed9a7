package mcp

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// A tasks/get forwarded to the gateway that received the call goes with
// the agent's token and body, without its session id, marked as
// forwarded (arrivalAgeHeader); that gateway's JSON-RPC answer is relayed
// as it came. Anything else (an error status, a body that is not a
// JSON-RPC answer with a result, nobody listening) is not relayed: the
// gateway answers the agent itself.
func TestForwardTask(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"act_1"}}`
	const answer = `{"jsonrpc":"2.0","id":7,"result":{"taskId":"act_1","status":"working"}}`
	var got *http.Request
	var gotBody string
	serve := func(code int, reply string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got, gotBody = r, string(b)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, reply)
		}))
	}
	ask := func(base string) (*httptest.ResponseRecorder, bool) {
		g := &Gateway{log: slog.New(slog.DiscardHandler), owners: owners{owner: base}}
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer agent-token")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Mcp-Session-Id", "sid-1")
		w := httptest.NewRecorder()
		return w, g.forwardTask(w, r, &pb.Execution{ExecutionId: "act_1", GatewayId: "gw-a"})
	}

	ok := serve(http.StatusOK, answer)
	defer ok.Close()
	w, relayed := ask(ok.URL)
	if !relayed || w.Body.String() != answer || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("relayed %v: %q", relayed, w.Body.String())
	}
	if got.URL.Path != "/mcp" || gotBody != body || got.Header.Get("Authorization") != "Bearer agent-token" ||
		got.Header.Get("Mcp-Session-Id") != "" || got.Header.Get(arrivalAgeHeader) == "" {
		t.Fatalf("forwarded %s %q with headers %v", got.URL.Path, gotBody, got.Header)
	}

	for _, tc := range []struct {
		name  string
		code  int
		reply string
	}{
		{"error status", http.StatusServiceUnavailable, answer},
		{"an error answer", http.StatusOK, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"task not found"}}`},
		{"not JSON-RPC", http.StatusOK, `<html>proxy</html>`},
	} {
		s := serve(tc.code, tc.reply)
		if w, relayed := ask(s.URL); relayed || w.Body.Len() != 0 {
			t.Errorf("%s: relayed %v, wrote %q; want the gateway to answer itself", tc.name, relayed, w.Body.String())
		}
		s.Close()
	}
	down := serve(http.StatusOK, answer)
	down.Close()
	if _, relayed := ask(down.URL); relayed {
		t.Error("nobody listening: relayed")
	}
	if _, relayed := ask(""); relayed {
		t.Error("no address for the gateway: relayed")
	}
}
