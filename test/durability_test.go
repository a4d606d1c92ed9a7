package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/freeport"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/server"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "portcullis-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "portcullis")
	out, err := exec.Command("go", "build", "-o", binary, "../cmd/portcullis").CombinedOutput()
	if err != nil {
		panic(fmt.Sprintf("build portcullis: %v\n%s", err, out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr is an address on 127.0.0.1 for a gateway or NATS to listen on
// later, handed out once on this machine (package freeport: a port a
// kernel's bind(0) in another test binary could take first failed CI).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// serveProcess runs `portcullis serve` and waits until it answers.
func serveProcess(t testing.TB, dataDir, addr, cfg string, extra ...string) *exec.Cmd {
	t.Helper()
	return serveProcessAs(t, "", dataDir, addr, cfg, extra...)
}

// serveProcessAs is serveProcess for a config with callers: it waits until
// the gateway answers token (a caller that may list executions).
//
// A process that joins another ledger with --nats-url U and gives neither
// --nats-creds nor --root-key gets, as an operator would give it, the
// gateway credentials and the root key of the process (or in-process
// gateway) that embeds U.
func serveProcessAs(t testing.TB, token, dataDir, addr, cfg string, extra ...string) *exec.Cmd {
	t.Helper()
	joins := flagValue(extra, "--nats-url")
	if joins != "" && flagValue(extra, "--nats-creds") == "" && flagValue(extra, "--root-key") == "" {
		if creds, root := joinFlags(joins); creds != "" && root != "" {
			extra = append(append([]string(nil), extra...), "--nats-creds", creds, "--root-key", root)
		}
	}
	cmd := exec.Command(binary, append([]string{"serve", "--data-dir", dataDir, "--listen", addr, "--config", cfg}, extra...)...)
	stderr := serveStderr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	hc := http.DefaultClient
	if token != "" {
		hc = &http.Client{Transport: bearer{token: token}}
	}
	c := portcullisv1connect.NewExecutionServiceClient(hc, "http://"+addr)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, err := c.ListExecutions(context.Background(), connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1}))
		if err == nil {
			if joins == "" {
				rememberServe(t, dataDir)
			}
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("portcullis serve did not come up on %s; the end of its log:\n%s", addr, stderr.tail(4096))
	return nil
}

// serveStderr collects a serve process's log, for the failure message of
// a gateway that does not come up (and shows it with -v).
func serveStderr(cmd *exec.Cmd) *syncBuffer {
	b := &syncBuffer{}
	cmd.Stderr = b
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(b, os.Stderr)
	}
	return b
}

// serveDirs maps the NATS URL of a `portcullis serve` process on the
// embedded default (its DATA_DIR/nats.url) to its data dir, which holds
// the NATS credentials and the root key a joining gateway is given.
var serveDirs sync.Map

func rememberServe(t testing.TB, dataDir string) {
	t.Helper()
	url, err := os.ReadFile(filepath.Join(dataDir, "nats.url"))
	if err != nil {
		t.Fatal(err)
	}
	u := strings.TrimSpace(string(url))
	// The newest server at a URL wins: ports are reused, so an in-process
	// gateway's entry for this URL is an earlier test's.
	natsCreds.Delete(u)
	rootKeys.Delete(u)
	serveDirs.Store(u, dataDir)
	t.Cleanup(func() { serveDirs.CompareAndDelete(u, dataDir) })
}

// serveDirOf is the data dir of the serve process embedding url ("" when
// none is known).
func serveDirOf(url string) string {
	d, _ := serveDirs.Load(url)
	s, _ := d.(string)
	return s
}

// joinFlags are the gateway credentials and root key files for a gateway
// joining the ledger at url, embedded by a serve process or an in-process
// gateway ("" when unknown).
func joinFlags(url string) (creds, rootKey string) {
	if dir := serveDirOf(url); dir != "" {
		return natsauth.Path(dir, natsauth.Gateway), filepath.Join(dir, server.RootKeyFile)
	}
	if g, ok := natsCreds.Load(url); ok {
		return g.(*server.Gateway).CredsFile(natsauth.Gateway), rootKeyOf(url)
	}
	return "", ""
}

// flagValue is the value of flag in args ("--flag v" or "--flag=v"), or "".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// SIGKILL after acknowledged appends loses nothing; the views catch up
// after restart and a retry still attaches.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	proc := serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)

	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": i}), "", fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.Msg.GetExecution().GetExecutionId()
			if i%3 == 0 {
				if _, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: ids[i]})); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = proc.Process.Wait()

	serveProcess(t, dataDir, addr, cfg)
	for i, id := range ids {
		res, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatalf("acknowledged execution %s lost: %v", id, err)
		}
		want := pb.State_STATE_ACCEPTED
		if i%3 == 0 {
			want = pb.State_STATE_DISPATCHED
		}
		if res.Msg.GetExecution().GetState() != want {
			t.Fatalf("%s is %v after restart, want %v", id, res.Msg.GetExecution().GetState(), want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := c.ListExecutions(ctx, connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1000}))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msg.GetExecutions()) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("views hold %d executions after restart, want %d", len(res.Msg.GetExecutions()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": 0}), "", "retry"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || res.Msg.GetExecution().GetExecutionId() != ids[0] || res.Msg.GetRecovery() != pb.Recovery_RECOVERY_WAIT {
		t.Fatalf("retry after restart: %v", res.Msg)
	}
}

// Views rebuilt from the stream equal the views built incrementally.
func TestRebuildEqualsIncremental(t *testing.T) {
	ctx := context.Background()
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), FingerprintKey: testKey,
		NatsListen: "127.0.0.1:-1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	g, err := server.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c := client(g)
	for i := range 100 {
		a := args(t, map[string]any{"order": i % 40})
		res, err := c.Begin(ctx, beginReq("create_payment", a, "", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		id := res.Msg.GetExecution().GetExecutionId()
		if res.Msg.GetDecision() == pb.Decision_DECISION_NEW && i%2 == 0 {
			mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
			mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201})))
		}
	}
	last, err := ledgerStream(t, g).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.Views.WaitFor(wctx, last.State.LastSeq); err != nil {
		t.Fatal(err)
	}
	g.Close(ctx)
	incremental := dumpViews(t, filepath.Join(o.DataDir, "views"))

	var reported uint64
	if err := server.Rebuild(ctx, o, func(applied, total uint64) { reported = applied }); err != nil {
		t.Fatal(err)
	}
	if reported != last.State.LastSeq {
		t.Fatalf("rebuild reported %d of %d events", reported, last.State.LastSeq)
	}
	rebuilt := dumpViews(t, filepath.Join(o.DataDir, "views"))
	for k, v := range incremental {
		if !reflect.DeepEqual(v, rebuilt[k]) {
			t.Errorf("row %q differs: %d bytes incremental, %d rebuilt", k, len(v), len(rebuilt[k]))
		}
	}
	for k := range rebuilt {
		if _, ok := incremental[k]; !ok {
			t.Errorf("row %q only rebuilt", k)
		}
	}
	if len(incremental) < 81 || !reflect.DeepEqual(incremental, rebuilt) {
		t.Fatalf("rebuilt views differ: %d rows incremental, %d rebuilt", len(incremental), len(rebuilt))
	}
}

func dumpViews(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	v, err := pebbleviews.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	d, err := v.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// SIGTERM shuts down gracefully: the process exits 0, and a restart on the
// same data dir serves what was written.
func TestSIGTERMShutsDownGracefully(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	proc := serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": 1}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	state, err := proc.Process.Wait()
	if err != nil || !state.Success() {
		t.Fatalf("after SIGTERM: %v %v", state, err)
	}
	serveProcess(t, dataDir, addr, cfg)
	if _, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: res.Msg.GetExecution().GetExecutionId()})); err != nil {
		t.Fatal(err)
	}
}

// A bad config is refused at start with the file, the line, the key and the reason.
func TestBadConfigRefusedAtStart(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  deploy_release:\n    retry: sometimes\n    match_window: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatal("serve started with a bad config")
	}
	want := cfg + `:3: tools.deploy_release.retry: unknown retry class "sometimes"`
	if !strings.Contains(string(out), want) {
		t.Fatalf("error does not say %q:\n%s", want, out)
	}
}
