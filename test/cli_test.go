package test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// run runs the portcullis binary in dir with stdin and returns its output
// and whether it exited 0.
func run(t *testing.T, dir string, stdin []byte, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORTCULLIS_ADDR=", "PORTCULLIS_TOKEN=")
	cmd.Stdin = bytes.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	return o.String(), e.String(), err == nil
}

// A command pointed at no ledger says so and creates nothing: no
// ./jetstream in the working directory, nothing in an empty --data-dir.
func TestCLINoLedgerFailsClearly(t *testing.T) {
	cwd, empty := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"audit", "verify"},
		{"budget", "verify"},
		{"export", "--out", filepath.Join(cwd, "out")},
		{"audit", "verify", "--data-dir", empty},
		{"budget", "verify", "--data-dir", filepath.Join(cwd, "missing")},
	} {
		_, stderr, ok := run(t, cwd, nil, args...)
		if ok || !strings.Contains(stderr, "no ledger") {
			t.Errorf("%v: ok=%v stderr %q, want a clear 'no ledger' error", args, ok, stderr)
		}
	}
	for _, dir := range []string{cwd, empty} {
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s holds %v after commands that found no ledger", dir, ents)
		}
	}
}

// serve refuses a bad config or flag before it writes keys or the data
// directory; config validate reports the same problem.
func TestServeValidatesBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("tools:\n  t1:\n    retry: sometimes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for _, args := range [][]string{
		{"serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--config", bad},
		{"serve", "--data-dir", data, "--listen", "no-port", "--config", writeConfig(t)},
		{"serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--log-format", "xml"},
		{"serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--fingerprint-key", "not-hex"},
	} {
		if _, stderr, ok := run(t, dir, nil, args...); ok || stderr == "" {
			t.Errorf("%v: ok=%v stderr %q", args, ok, stderr)
		}
		if _, err := os.Stat(data); err == nil {
			t.Fatalf("%v created the data directory before refusing", args)
		}
	}
	_, stderr, ok := run(t, dir, nil, "config", "validate", bad)
	if ok || !strings.Contains(stderr, "bad.yaml:3") || !strings.Contains(stderr, "retry") {
		t.Errorf("config validate: ok=%v %q", ok, stderr)
	}
	stdout, _, ok := run(t, dir, nil, "config", "validate", writeConfig(t))
	if !ok || !strings.Contains(stdout, ": valid: ") || !strings.Contains(stdout, "deploy_release") {
		t.Errorf("config validate of a good file: ok=%v %q", ok, stdout)
	}
	if stdout, _, ok := run(t, dir, nil, "version"); !ok || !strings.HasPrefix(stdout, "portcullis ") {
		t.Errorf("version: %q", stdout)
	}
}

// An operator finds the uncertain execution, resolves it on evidence, and
// reads its events from the stream as JSON.
func TestCLIExecutionsAndEventsDecode(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	b, err := c.Begin(ctx, plainBegin(t, "create_payment", map[string]any{"amount": 7}, "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := b.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	mustOK(t)(c.RecordOutcomeUnknown(ctx, connect.NewRequest(&pb.RecordOutcomeUnknownRequest{ExecutionId: id, Reason: "timeout"})))
	last, err := g.ExecutionsLog.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Views.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	out, stderr, ok := run(t, dir, nil, "executions", "list", "--addr", g.Addr, "--state", "outcome_unknown")
	if !ok || !strings.Contains(out, id) || !strings.Contains(out, "outcome_unknown") {
		t.Fatalf("executions list: ok=%v %q %q", ok, out, stderr)
	}
	if _, stderr, ok := run(t, dir, nil, "executions", "resolve", id, "--addr", g.Addr, "--evidence", "x"); ok || !strings.Contains(stderr, "--completed or --not-executed") {
		t.Fatalf("resolve without an outcome: ok=%v %q", ok, stderr)
	}
	if _, stderr, ok := run(t, dir, nil, "executions", "resolve", id, "--addr", g.Addr, "--completed", "--evidence", "x"); ok || !strings.Contains(stderr, "--target-status") {
		t.Fatalf("--completed without a status: ok=%v %q", ok, stderr)
	}
	out, stderr, ok = run(t, dir, nil, "executions", "resolve", id, "--addr", "http://"+g.Addr, "--completed", "--target-status", "201",
		"--result-body", `{"charge":"ch_1"}`, "--evidence", "GET /charges?key="+id+" answered 200")
	if !ok || !strings.Contains(out, "completed_result_not_delivered") {
		t.Fatalf("executions resolve: ok=%v %q %q", ok, out, stderr)
	}
	last, _ = g.ExecutionsLog.LastSeq(ctx)
	if err := g.Views.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := run(t, dir, nil, "executions", "list", "--addr", g.Addr, "--state", "OUTCOME_UNKNOWN"); !strings.Contains(out, "no executions match") {
		t.Fatalf("after resolve: %q", out)
	}

	s := ledgerStream(t, g)
	if d := s.CachedInfo().Config.Description; !strings.Contains(d, "portcullis events decode") {
		t.Errorf("stream description %q does not say how to read it", d)
	}
	msg, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, ok = run(t, dir, msg.Data, "events", "decode")
	if !ok || !strings.Contains(out, `"EVENT_TYPE_ACCEPTED"`) || !strings.Contains(out, id) || strings.Count(out, "\n") != 1 {
		t.Fatalf("events decode: ok=%v %q %q", ok, out, stderr)
	}
	tampered := bytes.Replace(msg.Data, []byte("create_payment"), []byte("create_pAyment"), 1)
	if _, stderr, ok := run(t, dir, tampered, "events", "decode"); ok || !strings.Contains(stderr, "hash") {
		t.Fatalf("a tampered event decoded cleanly: %q", stderr)
	}
	if out, _, ok := run(t, dir, []byte("plain value\n"), "events", "decode"); !ok || out != "plain value\n" {
		t.Fatalf("a non-event body: %q", out)
	}
}

// ListPending pages: three pending approvals in pages of two are each seen
// exactly once, and `approvals list` pages through them all.
func TestListPendingPages(t *testing.T) {
	ctx := context.Background()
	g := startGateway(t, "", nil)
	c := client(g)
	want := map[string]bool{}
	for i, svc := range []string{"db", "cache", "queue"} {
		b, err := c.Begin(ctx, beginReq("rotate_credentials", args(t, map[string]any{"service": svc}), "", fmt.Sprint(i)))
		if err != nil || b.Msg.GetExecution().GetState() != pb.State_STATE_AWAITING_APPROVAL {
			t.Fatalf("begin %s: %v %v", svc, b, err)
		}
		want[b.Msg.GetExecution().GetExecutionId()] = true
	}
	last, err := g.ExecutionsLog.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Views.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	ac := portcullisv1connect.NewApprovalServiceClient(http.DefaultClient, "http://"+g.Addr)
	seen, token, pages := map[string]int{}, "", 0
	for {
		res, err := ac.ListPending(ctx, connect.NewRequest(&pb.ListPendingRequest{PageSize: 2, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, x := range res.Msg.GetExecutions() {
			seen[x.GetExecutionId()]++
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
		if pages > 3 {
			t.Fatal("ListPending never ends")
		}
	}
	if pages != 2 || len(seen) != 3 {
		t.Fatalf("%d pages, seen %v, want 2 pages over %v", pages, seen, want)
	}
	for id, n := range seen {
		if !want[id] || n != 1 {
			t.Errorf("%s seen %d times (pending: %v)", id, n, want[id])
		}
	}
	out, stderr, ok := run(t, t.TempDir(), nil, "approvals", "list", "--addr", g.Addr)
	for id := range want {
		if !ok || !strings.Contains(out, id) {
			t.Errorf("approvals list misses %s: ok=%v %q %q", id, ok, out, stderr)
		}
	}
}
