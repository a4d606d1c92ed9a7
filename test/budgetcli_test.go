package test

import (
	"context"
	"encoding/json"
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

// Finance's commands against a running `portcullis serve`: show, export
// (CSV and JSON lines), and verify (live and from the export), whose exit
// code turns non-zero once an override let a decision past the limit.
func TestBudgetCommands(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewBudgetServiceClient(http.DefaultClient, "http://"+addr)
	mustOK(t)(c.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 50_000, Currency: "GBP"})))
	mustOK(t)(c.Reserve(ctx, reserve("acme", "op-A", "sha256:same", 42_000)))
	mustOK(t)(c.Reserve(ctx, reserve("acme", "op-B", "sha256:same", 12_000))) // denied, recorded
	natsURL, err := os.ReadFile(filepath.Join(dataDir, "nats.url"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(binary, args...).Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	url := strings.TrimSpace(string(natsURL))

	show, code := run("budget", "show", "acme", "--addr", "http://"+addr)
	if code != 0 || !strings.Contains(show, "held      42000") || !strings.Contains(show, "op-A") {
		t.Fatalf("show (exit %d):\n%s", code, show)
	}
	csvOut, code := run("budget", "export", "--nats-url", url, "--data-dir", dataDir, "--format", "csv")
	if code != 0 || strings.Count(csvOut, "\n") != 4 || !strings.Contains(csvOut, ",denied,op-B,") {
		t.Fatalf("csv export (exit %d):\n%s", code, csvOut)
	}
	var rep struct {
		Events int
		Clean  bool
	}
	out, code := run("budget", "verify", "--nats-url", url, "--data-dir", dataDir)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.Clean || rep.Events != 3 {
		t.Fatalf("verify of a clean ledger (exit %d): %s", code, out)
	}
	r := reserve("acme", "op-B", "sha256:same", 12_000)
	r.Msg.Override = &pb.Override{Reason: "quarter-end"}
	mustOK(t)(c.Reserve(ctx, r))
	export := filepath.Join(t.TempDir(), "budget.jsonl")
	if _, code := run("budget", "export", "--nats-url", url, "--data-dir", dataDir, "--out", export); code != 0 {
		t.Fatal("export failed")
	}
	for _, src := range [][]string{{"--nats-url", url, "--data-dir", dataDir}, {"--from", export}} {
		out, code = run(append([]string{"budget", "verify"}, src...)...)
		if code != 1 || !strings.Contains(out, `"over_limit"`) || !strings.Contains(out, `"warning"`) {
			t.Fatalf("verify %v after an override (exit %d): %s", src, code, out)
		}
	}
}
