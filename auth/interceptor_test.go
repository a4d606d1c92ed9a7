package auth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// recorder is an ExecutionService whose handlers count calls and report
// who called.
type recorder struct {
	svc.UnimplementedExecutionServiceHandler
	calls atomic.Int32
}

func (r *recorder) Authorize(ctx context.Context, _ *connect.Request[pb.AuthorizeRequest]) (*connect.Response[pb.AuthorizeResponse], error) {
	r.calls.Add(1)
	return connect.NewResponse(&pb.AuthorizeResponse{Execution: &pb.Execution{AuthorizedBy: FromContext(ctx).Name}}), nil
}

func (r *recorder) GetExecution(context.Context, *connect.Request[pb.GetExecutionRequest]) (*connect.Response[pb.GetExecutionResponse], error) {
	r.calls.Add(1)
	return connect.NewResponse(&pb.GetExecutionResponse{Execution: &pb.Execution{Actor: "agent-9"}}), nil
}

func newTestAuthenticator(t *testing.T) *Authenticator {
	t.Helper()
	a, err := New([]Caller{
		{Name: "alice", TokenSHA256: sum("alice-token"), Roles: []Role{Approver}},
		{Name: "deploy-runner", TokenSHA256: sum("runner-token"), Roles: []Role{Executor}, ActsFor: []string{"agent-7"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestInterceptor(t *testing.T) {
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle(svc.NewExecutionServiceHandler(rec, connect.WithInterceptors(NewInterceptor(newTestAuthenticator(t), Policy{}, quiet))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	call := func(token string, by string) (*connect.Response[pb.AuthorizeResponse], error) {
		c := svc.NewExecutionServiceClient(srv.Client(), srv.URL)
		req := connect.NewRequest(&pb.AuthorizeRequest{ExecutionId: "act_1", By: by})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		return c.Authorize(context.Background(), req)
	}
	_, err := call("", "")
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated || ce.Meta().Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %v", err)
	}
	if _, err := call("nobody", ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("unknown token: %v", err)
	}
	if _, err := call("runner-token", ""); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("executor authorizes: %v", err)
	}
	if _, err := call("alice-token", "bob"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("alice claims to be bob: %v", err)
	}
	if n := rec.calls.Load(); n != 0 {
		t.Fatalf("refused calls reached the handler %d times", n)
	}
	res, err := call("alice-token", "")
	if err != nil || res.Msg.GetExecution().GetAuthorizedBy() != "alice" {
		t.Fatalf("alice authorizes: %v, %v", res, err)
	}
	// The response rule: an executor reads only its actors' executions.
	c := svc.NewExecutionServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: "act_1"})
	req.Header().Set("Authorization", "Bearer runner-token")
	if _, err := c.GetExecution(context.Background(), req); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("executor reads another actor's execution: %v", err)
	}
}

func TestMiddleware(t *testing.T) {
	h := Middleware(newTestAuthenticator(t), []Role{Approver}, quiet, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+FromContext(r.Context()).Name)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(token string) (int, string, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/console", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	if code, _, h := get(""); code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: %d %v", code, h)
	}
	if code, _, _ := get("runner-token"); code != http.StatusForbidden {
		t.Fatalf("executor on an approver page: %d", code)
	}
	if code, body, _ := get("alice-token"); code != http.StatusOK || body != "hello alice" {
		t.Fatalf("alice: %d %q", code, body)
	}
}

// Optional lets a request without credentials through without a
// principal, names the caller of one with valid credentials, and refuses
// credentials that belong to no caller; without callers everyone is the
// local operator.
func TestOptional(t *testing.T) {
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := FromContext(r.Context())
		if p == nil {
			_, _ = io.WriteString(w, "anonymous")
			return
		}
		_, _ = io.WriteString(w, p.Name)
	})
	local, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		a             *Authenticator
		authorization string
		status        int
		body          string
	}{
		{"no credentials", newTestAuthenticator(t), "", http.StatusOK, "anonymous"},
		{"a caller's token", newTestAuthenticator(t), "Bearer alice-token", http.StatusOK, "alice"},
		{"a token of no caller", newTestAuthenticator(t), "Bearer nobody-token", http.StatusUnauthorized, ""},
		{"not a bearer token", newTestAuthenticator(t), "Basic Zm9vOmJhcg==", http.StatusUnauthorized, ""},
		{"no callers configured", local, "", http.StatusOK, LocalOperator},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.authorization != "" {
			req.Header.Set("Authorization", tc.authorization)
		}
		rec := httptest.NewRecorder()
		Optional(tc.a, quiet, who).ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.status)
		}
		if tc.status == http.StatusOK && rec.Body.String() != tc.body {
			t.Errorf("%s: handler saw %q, want %q", tc.name, rec.Body.String(), tc.body)
		}
		if tc.status == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no Bearer challenge", tc.name)
		}
	}
}
