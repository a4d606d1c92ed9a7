package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	"github.com/portcullis-dev/portcullis/executor"
)

const execID = "act_01M8MFY3Q2ABCDEFGHJKMNPQRS"

// The HTTP executor sends the execution id in the tool's
// idempotency_header, and reads the status URL: 2xx is done (with the
// target's answer), 404 is absence, anything else settles nothing.
func TestHTTPExecutorSendAndStatus(t *testing.T) {
	var mu sync.Mutex
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		switch r.URL.Path {
		case "/status/done-" + execID:
			io.WriteString(w, `{"release":"r-1"}`)
		case "/status/absent-" + execID:
			http.NotFound(w, r)
		case "/status/broken-" + execID:
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	h := dispatch.HTTPExecutor{Client: executor.NewHTTP()}
	tool := config.Tool{Name: "deploy", Channel: "http", Method: http.MethodPost, Target: srv.URL + "/releases", IdempotencyHeader: "X-Request-Id"}
	if o := h.Send(tool, execID, []byte(`{"a":1}`)); o.Observed != executor.Answered || o.Status != http.StatusCreated {
		t.Fatalf("send: %+v", o)
	}
	mu.Lock()
	sent := headers[0]
	mu.Unlock()
	if sent.Get("X-Request-Id") != execID || sent.Get("Idempotency-Key") != "" {
		t.Fatalf("idempotency_header X-Request-Id: sent %q, Idempotency-Key %q", sent.Get("X-Request-Id"), sent.Get("Idempotency-Key"))
	}
	for _, tc := range []struct {
		prefix string
		want   dispatch.Finding
	}{{"done-", dispatch.Done}, {"absent-", dispatch.Absent}, {"broken-", dispatch.Unsettled}} {
		tool.StatusURL = srv.URL + "/status/" + tc.prefix + "{execution_id}"
		st := h.Status(context.Background(), tool, execID)
		if st.Finding != tc.want {
			t.Fatalf("status %s: %+v, want finding %v", tc.prefix, st, tc.want)
		}
		if tc.want == dispatch.Done && (st.Code != 200 || st.Body != `{"release":"r-1"}`) {
			t.Fatalf("done: %+v", st)
		}
		if tc.want == dispatch.Absent && !strings.Contains(st.Evidence, "404") {
			t.Fatalf("absent without its evidence: %+v", st)
		}
		// The evidence is the observation; whether it proves absence is the
		// driver's word, by the dispatch deadline (audit s13: before it the
		// answer read "absence proven (status 404), but … does not prove
		// absence").
		if tc.want == dispatch.Absent && strings.Contains(st.Evidence, "proven") {
			t.Fatalf("the observation claims a proof: %q", st.Evidence)
		}
	}
	tool.StatusURL = ""
	if st := h.Status(context.Background(), tool, execID); st.Finding != dispatch.Unsettled {
		t.Fatalf("no status_url: %+v", st)
	}
}

// A GET tool's arguments that cannot be query parameters are refused
// before Begin (the driver's Check): nothing is recorded or sent.
func TestHTTPExecutorCheck(t *testing.T) {
	h := dispatch.HTTPExecutor{Client: executor.NewHTTP()}
	get := config.Tool{Name: "get_release", Channel: "http", Method: http.MethodGet, Target: "http://127.0.0.1:1/releases"}
	if err := h.Check(get, []byte(`{"release_id":"r8","n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(get, []byte(`{"release_id":["r8"]}`)); err == nil || !strings.Contains(err.Error(), `"release_id" is an array`) {
		t.Fatalf("nested argument of a GET tool: %v", err)
	}
	post := config.Tool{Name: "deploy", Channel: "http", Method: http.MethodPost, Target: "http://127.0.0.1:1/deploys"}
	if err := h.Check(post, []byte(`{"release_id":["r8"]}`)); err != nil {
		t.Fatalf("a POST tool's body may nest: %v", err)
	}
}
