package test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// One embedded JetStream server per data directory. An operator command
// given only a running gateway's --data-dir reads through that gateway's
// NATS (it used to start a second server on the live store and overwrite
// nats.url with its own address); a second gateway on the directory is
// refused, and so is rebuilding its views. Once the gateway is gone
// (SIGKILL: the kernel drops its lock), the same commands start their own
// embedded server on the stopped store.
func TestLiveDataDirIsNotOpenedTwice(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	gw := serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": 1}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetExecution().GetExecutionId()
	urlFile := filepath.Join(dataDir, "nats.url")
	before := string(must(os.ReadFile(urlFile)))

	for _, args := range [][]string{{"audit", "verify"}, {"events", "timeline", "--execution", id}} {
		out, err := exec.Command(binary, append(args, "--data-dir", dataDir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v on a live data dir: %v\n%s", args, err, out)
		}
		if args[0] == "events" && !strings.Contains(string(out), id) {
			t.Fatalf("timeline of %s read nothing:\n%s", id, out)
		}
		if after := string(must(os.ReadFile(urlFile))); after != before {
			t.Fatalf("%v rewrote nats.url: %q → %q", args, before, after)
		}
	}
	// An execution the ledger does not hold is an error, not an empty answer.
	if out, err := exec.Command(binary, "events", "timeline", "--execution", "act_01M92FZBA2XPH4NFQB6HTY1SQZ", "--data-dir", dataDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "not found") {
		t.Fatalf("timeline of an unknown execution: %v\n%s", err, out)
	}
	// It reads through the URL the gateway wrote, and starts no server of
	// its own: pointed at a dead address it fails, naming the address.
	if err := os.WriteFile(urlFile, []byte("nats://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "audit", "verify", "--data-dir", dataDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "127.0.0.1:1") {
		t.Fatalf("audit verify with the running gateway's address unreachable: %v (want a failure naming it; a server of its own would have answered)\n%s", err, out)
	}
	if err := os.WriteFile(urlFile, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	// The gateway still serves, on the same NATS.
	if _, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})); err != nil {
		t.Fatalf("the gateway after the readers: %v", err)
	}
	// Rebuilding a live gateway's views is refused: the swap would pull
	// them from under it.
	if out, err := exec.Command(binary, "rebuild", "--data-dir", dataDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("rebuild on a live data dir: %v\n%s", err, out)
	}
	out, err := exec.Command(binary, "serve", "--data-dir", dataDir, "--listen", freeAddr(t), "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("a second gateway on a live data dir: %v\n%s", err, out)
	}

	if err := gw.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = gw.Process.Wait()
	out, err = exec.Command(binary, "audit", "verify", "--data-dir", dataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verified") {
		t.Fatalf("audit verify of the stopped gateway's data dir: %v\n%s", err, out)
	}
	if out, err := exec.Command(binary, "rebuild", "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("rebuild of the stopped gateway's views: %v\n%s", err, out)
	}
}
