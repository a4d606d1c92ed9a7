package test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Bad input gets a clear error and appends nothing.
func TestBadInputAppendsNothing(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	s := ledgerStream(t, g)
	res, err := c.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "r1"}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetExecution().GetExecutionId()
	before := streamCount(t, s)

	post := func(method, body string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+g.Addr+"/portcullis.v1.ExecutionService/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, method, body, wantCode, wantText string
	}{
		{"malformed JSON", "Begin", `{"action": {"tool": `, "invalid_argument", "unmarshal"},
		{"wrong type", "Begin", `{"action": {"tool": 7}}`, "invalid_argument", "unmarshal"},
		{"no action", "Begin", `{}`, "invalid_argument", "action is required"},
		{"no actor", "Begin", `{"action": {"tool": "deploy_release"}}`, "invalid_argument", "actor"},
		{"unknown tool", "Begin", `{"action": {"actor": "a", "tool": "nope"}}`, "failed_precondition", `"nope"`},
		{"oversized arguments", "Begin", `{"action": {"actor": "a", "tool": "deploy_release", "arguments": {"blob": "` + strings.Repeat("x", 70<<10) + `"}}}`, "invalid_argument", "65536"},
		{"oversized request", "Begin", `{"action": {"actor": "a", "tool": "deploy_release", "arguments": {"blob": "` + strings.Repeat("x", 2<<20) + `"}}}`, "resource_exhausted", ""},
		{"unknown execution", "MarkDispatched", `{"executionId": "act_01J4K8J7DX7V0000000000000Z"}`, "not_found", "act_01J4K8J7DX7V0000000000000Z"},
		{"malformed execution id", "MarkDispatched", `{"executionId": "act_x.>"}`, "invalid_argument", "act_<ULID>"},
		{"illegal transition", "MarkDelivered", `{"executionId": "` + id + `"}`, "failed_precondition", "STATE_ACCEPTED"},
		{"misspelt field", "Begin", `{"action": {"actor": "agent-7", "tool": "create_payment", "intentScope": "run:1"}, "operationkey": "typo-1"}`, "invalid_argument", "operationkey"},
		{"bad resolution", "Resolve", `{"executionId": "` + id + `"}`, "invalid_argument", "resolution"},
		{"oversized result", "RecordResult", `{"executionId": "` + id + `", "resultBody": "` + strings.Repeat("x", 300<<10) + `"}`, "invalid_argument", "262144"},
		{"bad page size", "ListExecutions", `{"pageSize": 5000}`, "invalid_argument", "page_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.method, tc.body)
			var e struct{ Code, Message string }
			_ = json.Unmarshal([]byte(body), &e)
			if status == 200 || e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantText) {
				t.Fatalf("HTTP %d %s; want code %s mentioning %q", status, body, tc.wantCode, tc.wantText)
			}
		})
	}
	if after := streamCount(t, s); after != before {
		t.Fatalf("bad input appended %d events", after-before)
	}
	// A secret-bearing argument never reaches the stream in the clear.
	secret := "s3cr3t-token-value-42"
	if _, err := c.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "r2", "token": secret}), "", "2")); err != nil {
		t.Fatal(err)
	}
	evs := subjectEvents(t, s, "pc.>")
	if len(evs) != 2 {
		t.Fatalf("read %d events from the stream", len(evs))
	}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("secret in event %s", ev.GetEventId())
		}
	}
	// Nor the views.
	last, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Views.WaitFor(ctx, last.State.LastSeq); err != nil {
		t.Fatal(err)
	}
	rows, err := g.Views.Dump()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rows {
		if bytes.Contains(v, []byte(secret)) || strings.Contains(k, secret) {
			t.Fatalf("secret in view row %q", k)
		}
	}
	_, err = c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
}
