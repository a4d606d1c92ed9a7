package test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/portcullis-dev/portcullis/executor"
)

// sshd is a real OpenSSH server on a loopback port, for the SSH executor.
type sshd struct {
	addr    string
	hostKey string // authorized_keys line to pin
	keyFile string // the client's private key
	home    string // the remote account's HOME (markers live below it)
	proc    *os.Process
}

func startSSHD(t *testing.T) *sshd {
	t.Helper()
	bin := findSSHD()
	if bin == "" && os.Geteuid() == 0 {
		// A fresh machine: install the real server the test needs.
		for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "openssh-server"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("apt-get %v: %v\n%s", args, err, out)
			}
		}
		bin = findSSHD()
	}
	if bin == "" {
		t.Fatal("sshd is required: install openssh-server (.ci/run does)")
	}
	dir := t.TempDir()
	writeKey := func(name string) ssh.PublicKey {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		block, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		sp, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	hostPub := writeKey("host_key")
	clientPub := writeKey("client_key")
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}
	// The remote account's HOME is the test's own directory, so markers
	// land under it, never in the real home.
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cfg := fmt.Sprintf(`Port %s
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile %s/sshd.pid
SetEnv HOME=%s
`, port, dir, dir, dir, home)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755)
	cmd := exec.Command(bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sshd did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &sshd{addr: addr, hostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub))), keyFile: filepath.Join(dir, "client_key"), home: home, proc: cmd.Process}
}

// SSH: the agent's connection is cut after the remote command started; the
// retry does not run it twice (the remote side shows one run), and the exit
// status is recorded.
func TestMCPSSHExecutorRunsOnce(t *testing.T) {
	sd := startSSHD(t)
	tg := newTarget(t)
	runs := filepath.Join(t.TempDir(), "runs.log")
	cfg := mcpConfig(t, tg)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	whoami := strings.TrimSpace(string(must(exec.Command("id", "-un").Output())))
	extra := fmt.Sprintf(`  migrate_db:
    description: Run a database migration on the host
    channel: ssh
    target: %s@%s
    host_key: %q
    credential_ref: file:%s
    command: 'echo run >> %s; sleep 1; cat; echo migrated; exit 3'
    retry: status_query
    match_window: 1h
  migrate_db_slow:
    channel: ssh
    target: %[1]s@%[2]s
    host_key: %[3]q
    credential_ref: file:%[4]s
    command: 'echo slow >> %[5]s; sleep 1; echo migrated-slowly'
    timeout: 300ms
    retry: status_query
    match_window: 1h
`, whoami, sd.addr, sd.hostKey, sd.keyFile, runs)
	if err := os.WriteFile(cfg, append(b, []byte(extra)...), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startMCPGateway(t, cfg, "")
	args := map[string]any{"version": "42"}
	meta := sdk.Meta{"io.portcullis/intent-scope": "run:migrations-7"} // one agent run across reconnects
	s1, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	started := func() bool { b, _ := os.ReadFile(runs); return strings.Contains(string(b), "run") }
	cctx, cancel := cutWhen(started) // cut once the remote command runs
	_, err = s1.CallTool(cctx, &sdk.CallToolParams{Name: "migrate_db", Arguments: args, Meta: meta})
	cancel()
	s1.Close()
	if err == nil {
		t.Fatal("the first call should have been cut")
	}
	if !started() {
		t.Fatal("the first call never reached the remote host before the cut")
	}
	s2, err := mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	res, err := s2.CallTool(context.Background(), &sdk.CallToolParams{Name: "migrate_db", Arguments: args, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	rec := structured(t, res)
	text := res.Content[0].(*sdk.TextContent).Text
	if rec["state"] != "completed" || fmt.Sprint(rec["target_status"]) != "3" || !strings.Contains(text, "migrated") || !strings.Contains(text, `"version":"42"`) || !res.IsError {
		t.Fatalf("retry: %v %q", rec, text)
	}
	log, err := os.ReadFile(runs)
	if err != nil || strings.Count(string(log), "run") != 1 {
		t.Fatalf("the remote command ran %d times (%v)", strings.Count(string(log), "run"), err)
	}
	// The SSH connection itself is cut (the dispatch timeout) while the
	// command runs: the outcome is unknown, the command goes on; the retry
	// asks the marker and collects its exit status without a second run.
	first, err := s2.CallTool(context.Background(), &sdk.CallToolParams{Name: "migrate_db_slow", Arguments: args, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	if st := structured(t, first)["state"]; st != "outcome_unknown" {
		t.Fatalf("slow first call: %v", structured(t, first))
	}
	slowID := structured(t, first)["execution_id"].(string)
	waitFor(t, "the slow command finishes (its marker holds an exit status)", func() bool {
		_, err := os.Stat(filepath.Join(sd.home, ".portcullis", "runs", slowID, "exit"))
		return err == nil
	})
	again, err := s2.CallTool(context.Background(), &sdk.CallToolParams{Name: "migrate_db_slow", Arguments: args, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	if r := structured(t, again); r["state"] != "completed" || fmt.Sprint(r["target_status"]) != "0" || again.IsError {
		t.Fatalf("slow retry: %v", r)
	}
	log, _ = os.ReadFile(runs)
	if strings.Count(string(log), "slow") != 1 {
		t.Fatalf("the slow command ran %d times", strings.Count(string(log), "slow"))
	}
	// The marker holds the execution's exit status.
	id := rec["execution_id"].(string)
	exit, err := os.ReadFile(filepath.Join(sd.home, ".portcullis", "runs", id, "exit"))
	if err != nil || strings.TrimSpace(string(exit)) != "3" {
		t.Fatalf("marker exit status %q (%v)", exit, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func findSSHD() string {
	if p, err := exec.LookPath("sshd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err == nil {
		return "/usr/sbin/sshd"
	}
	return ""
}

// A server that accepts the connection and then stalls (sshd stopped: the
// kernel completes the TCP handshake, nothing answers) does not hold a
// dispatch past its tool timeout, and what it finds queued when it wakes
// up never runs: the executor bounds connect, handshake and start by the
// start-by time and hangs up, and answers NotSent (no start request was
// sent). Before, only the TCP connect was bounded: the handshake waited
// for the server, and the command started after the dispatch deadline,
// when a retry had already proven its absence and run it anew.
func TestSSHStalledServerNeverStartsLate(t *testing.T) {
	sd := startSSHD(t)
	ran := filepath.Join(t.TempDir(), "ran")
	whoami := strings.TrimSpace(string(must(exec.Command("id", "-un").Output())))
	r := executor.SSHRequest{Target: whoami + "@" + sd.addr, HostKey: sd.hostKey, CredentialRef: "file:" + sd.keyFile,
		Command: "echo run >> " + ran, ExecutionID: "act_01M92FZBA2XPH4NFQB6HTY1SQZ", Timeout: time.Second}
	if err := sd.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	go func() { // whatever Do does, the server wakes up after 4 s
		time.Sleep(4 * time.Second)
		_ = sd.proc.Signal(syscall.SIGCONT)
		close(resumed)
	}()
	o := executor.SSH{}.Do(r)
	if o.Observed != executor.NotSent {
		t.Fatalf("stalled server: %+v, want NotSent", o)
	}
	<-resumed
	// The woken server finds the queued connection; nothing may run.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, _, _, err := executor.SSH{}.Ask(ctx, r)
	if err != nil || m != executor.MarkerAbsent {
		t.Fatalf("marker after the server woke: %v %v, want absent", m, err)
	}
	time.Sleep(time.Second) // a late start would have written by now
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Fatal("the command ran after its start-by time")
	}
}
