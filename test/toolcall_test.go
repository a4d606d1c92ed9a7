package test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// boundReq is a Begin for bound_deploy that leaves the fixed fields to the
// tool definition.
func boundReq(argsJSON string) *connect.Request[pb.BeginRequest] {
	return connect.NewRequest(&pb.BeginRequest{
		Action: &pb.Action{Actor: "agent-7", Tool: "bound_deploy", ArgumentsJson: argsJSON},
	})
}

// Connect Begin is bound to the tool definition like /mcp: fixed fields
// come from it, a differing value is refused naming the field, the input
// schema is applied, and arguments_json keeps exact numbers.
func TestBeginBoundToToolDefinition(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	s := ledgerStream(t, g)

	res, err := c.Begin(ctx, boundReq(`{"release_id":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	x := res.Msg.GetExecution()
	if x.GetChannel() != "http" || x.GetTarget() != "http://127.0.0.1:1/deploys" || x.GetMethod() != "POST" {
		t.Fatalf("fixed fields not taken from the definition: %v", x)
	}
	// Sending the defined values is the same action.
	same := boundReq(`{"release_id":"r1"}`)
	same.Msg.Action.Channel, same.Msg.Action.Target, same.Msg.Action.Method, same.Msg.Action.CredentialRef =
		"http", "http://127.0.0.1:1/deploys", "POST", "env:DEPLOY_TOKEN"
	again, err := c.Begin(ctx, same)
	if err != nil {
		t.Fatal(err)
	}
	if again.Msg.GetExecution().GetFingerprint() != x.GetFingerprint() || again.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED {
		t.Fatalf("defined values spelled out: %v", again.Msg)
	}

	before := streamCount(t, s)
	for _, tc := range []struct {
		name  string
		edit  func(*pb.Action)
		field string
	}{
		{"target", func(a *pb.Action) { a.Target = "http://evil.example/deploys" }, "action.target"},
		{"channel", func(a *pb.Action) { a.Channel = "ssh" }, "action.channel"},
		{"method", func(a *pb.Action) { a.Method = "DELETE" }, "action.method"},
		{"credential_ref", func(a *pb.Action) { a.CredentialRef = "env:OTHER" }, "action.credential_ref"},
		{"schema: missing release_id", func(a *pb.Action) { a.ArgumentsJson = `{"replicas":3}` }, "input schema"},
		{"schema: wrong type", func(a *pb.Action) { a.ArgumentsJson = `{"release_id":"r1","replicas":"three"}` }, "input schema"},
		{"both argument forms", func(a *pb.Action) { a.Arguments = args(t, map[string]any{"release_id": "r1"}) }, "arguments_json"},
	} {
		req := boundReq(`{"release_id":"r1"}`)
		tc.edit(req.Msg.Action)
		_, err := c.Begin(ctx, req)
		wantCode(t, err, connect.CodeInvalidArgument, tc.field)
	}
	if streamCount(t, s) != before {
		t.Fatal("a refused Begin appended events")
	}

	// Exact numbers: through arguments_json 2^53+1 never silently becomes
	// 2^53 (a Struct rounds both to 2^53, and they would match). RFC 8785
	// cannot carry it as a number, so the fingerprint refuses it and says
	// to send it as a string; 2^53 itself is exact and accepted.
	before = streamCount(t, s)
	_, err = c.Begin(ctx, boundReq(`{"release_id":"r2","replicas":9007199254740993}`))
	wantCode(t, err, connect.CodeInvalidArgument, "not exactly representable", "string")
	if streamCount(t, s) != before {
		t.Fatal("an inexact number was recorded")
	}
	b, err := c.Begin(ctx, boundReq(`{"release_id":"r2","replicas":9007199254740992}`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("2^53: %v", b.Msg)
	}
	// As strings the two are different actions.
	s1, err := c.Begin(ctx, boundReq(`{"release_id":"9007199254740993"}`))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.Begin(ctx, boundReq(`{"release_id":"9007199254740992"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s1.Msg.GetExecution().GetFingerprint() == s2.Msg.GetExecution().GetFingerprint() || s2.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatal("9007199254740993 and 9007199254740992 gave the same fingerprint")
	}
	// Small numbers: the Struct form and arguments_json are the same action.
	st := boundReq("")
	st.Msg.Action.Arguments = args(t, map[string]any{"release_id": "r3", "replicas": 3})
	j, err := c.Begin(ctx, boundReq(`{"replicas":3,"release_id":"r3"}`))
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.Begin(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if j.Msg.GetExecution().GetFingerprint() != k.Msg.GetExecution().GetFingerprint() {
		t.Fatal("Struct and arguments_json disagree on a small integer")
	}
}

// /mcp and Connect Begin share one binding: the same action through
// either gets the same fingerprint and attaches to the other's execution,
// whichever came first.
func TestToolcallMCPAndBeginAttach(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	c := client(g)
	s := agentSession(t, g.Addr)
	begin := func(argsJSON string) *pb.BeginResponse {
		t.Helper()
		res, err := c.Begin(ctx, connect.NewRequest(&pb.BeginRequest{
			Action: &pb.Action{Actor: "agent-7", Tool: "deploy_release", ArgumentsJson: argsJSON},
		}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}

	// MCP first, then Begin: Begin attaches and gets the stored result.
	m := callRecord(t, s, "deploy_release", map[string]any{"release_id": "tc-1"}, nil)
	if m["state"] != "completed" {
		t.Fatalf("MCP call: %v", m)
	}
	b := begin(`{"release_id":"tc-1"}`)
	if b.GetDecision() != pb.Decision_DECISION_ATTACHED || b.GetExecution().GetExecutionId() != m["execution_id"] ||
		b.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT {
		t.Fatalf("Begin after the MCP call: %v (MCP: %v)", b, m)
	}
	// Begin first, then MCP: the MCP call resumes Begin's execution.
	b2 := begin(`{"release_id":"tc-2"}`)
	if b2.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("Begin: %v", b2)
	}
	m2 := callRecord(t, s, "deploy_release", map[string]any{"release_id": "tc-2"}, nil)
	if m2["state"] != "completed" || m2["execution_id"] != b2.GetExecution().GetExecutionId() {
		t.Fatalf("MCP call after Begin: %v (Begin: %v)", m2, b2)
	}
	if got := getExecution(t, g, b2.GetExecution().GetExecutionId()).GetFingerprint(); got != b2.GetExecution().GetFingerprint() {
		t.Fatalf("fingerprint changed: %s then %s", b2.GetExecution().GetFingerprint(), got)
	}
	if n := tg.performed.Load(); n != 2 {
		t.Fatalf("target performed %d, want 2", n)
	}
}
