package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// The remote side of the SSH executor is a small wrapper around the
// contract's command. It keeps a durable marker per execution under
// ~/.portcullis/runs/<execution id>: the directory is created atomically
// before the command starts (a second start of the same execution is
// refused), "exit" holds the exit status and "out" the output once the
// command is done. The command runs detached from the SSH session, so a
// dropped connection does not stop it, and the executor asks the marker
// before doing anything else.
const (
	markerRoot      = "$HOME/.portcullis/runs"
	alreadyStarted  = 222 // wrapper exit status: this execution was started before
	sshDialTimeout  = 10 * time.Second
	markerPollEvery = 100 * time.Millisecond
	maxExitStatus   = 255 // a shell's exit status is 0..255
)

// SSHRequest is one dispatch to an ssh target.
type SSHRequest struct {
	Target        string // user@host:port
	HostKey       string // pinned, in authorized_keys format ("ssh-ed25519 AAAA…")
	CredentialRef string // file:/path of the private key (or env:NAME holding it)
	Command       string // run by sh -c; the arguments arrive as JSON on stdin
	ExecutionID   string
	Stdin         []byte
	Timeout       time.Duration
}

// Marker is what the remote marker says about an execution.
type Marker int

// Marker states.
const (
	MarkerAbsent  Marker = iota + 1 // never started: absence is proven
	MarkerRunning                   // started, no exit status yet
	MarkerDone                      // finished: ExitStatus and Output hold the result
)

// SSH runs commands through the wrapper.
type SSH struct{}

func (SSH) dial(r SSHRequest) (*ssh.Client, error) {
	user, hostport, ok := strings.Cut(r.Target, "@")
	if !ok {
		return nil, fmt.Errorf("ssh target %q: want user@host:port", r.Target)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "22")
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(r.HostKey))
	if err != nil {
		return nil, fmt.Errorf("ssh host key for %s: %w (pin it in the config; there is no trust on first use)", hostport, err)
	}
	keyPEM, err := Credential(r.CredentialRef)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey([]byte(keyPEM + "\n"))
	if err != nil {
		return nil, fmt.Errorf("ssh key %s: unreadable", r.CredentialRef)
	}
	return ssh.Dial("tcp", hostport, &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(pinned), Timeout: sshDialTimeout,
	})
}

// Do starts the command through the wrapper and waits for its exit
// status. A failure before the wrapper started is NotSent; a connection
// lost after it started is Unknown (the marker tells later).
func (s SSH) Do(r SSHRequest) Outcome {
	if !validID(r.ExecutionID) {
		return Outcome{Observed: NotSent, Reason: "bad execution id"}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c, err := s.dial(r)
	if err != nil {
		return Outcome{Observed: NotSent, Reason: "no byte of the command left the process: " + err.Error()}
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return Outcome{Observed: NotSent, Reason: "ssh session: " + err.Error()}
	}
	defer sess.Close()
	sess.Stdin = bytes.NewReader(r.Stdin)
	var out bytes.Buffer
	sess.Stdout, sess.Stderr = &limited{w: &out}, &limited{w: &out}
	if err := sess.Start(wrapper(r.ExecutionID, r.Command)); err != nil {
		return Outcome{Observed: NotSent, Reason: "ssh start: " + err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		return Outcome{Observed: Unknown, Reason: fmt.Sprintf("no exit status within %s; the command may still run (the marker will tell)", timeout)}
	}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return Outcome{Observed: Answered, Status: 0, Body: out.String(), ContentType: "text/plain"}
	case errors.As(err, &exit) && exit.ExitStatus() == alreadyStarted:
		return Outcome{Observed: Unknown, Reason: "the remote marker shows this execution was started before; it was not started again"}
	case errors.As(err, &exit):
		return Outcome{Observed: Answered, Status: exit.ExitStatus(), Body: out.String(), ContentType: "text/plain"}
	}
	return Outcome{Observed: Unknown, Reason: "the connection dropped after the command started: " + err.Error()}
}

// Ask reads the marker of an execution (used before anything else after a
// dropped connection).
func (s SSH) Ask(ctx context.Context, r SSHRequest) (Marker, int, string, error) {
	if !validID(r.ExecutionID) {
		return 0, 0, "", errors.New("bad execution id")
	}
	c, err := s.dial(r)
	if err != nil {
		return 0, 0, "", err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return 0, 0, "", err
	}
	defer sess.Close()
	m := markerRoot + "/" + r.ExecutionID
	b, err := sess.Output(`m="` + m + `"; if [ ! -d "$m" ]; then echo absent; elif [ -f "$m/exit" ]; then echo "done $(cat "$m/exit")"; cat "$m/out"; else echo running; fi`)
	if err != nil {
		return 0, 0, "", fmt.Errorf("ask marker: %w", err)
	}
	return parseMarker(b)
}

// parseMarker reads the marker query's output: "absent", "running", or
// "done CODE" followed by the command's output.
func parseMarker(b []byte) (Marker, int, string, error) {
	head, body, _ := strings.Cut(string(b), "\n")
	switch {
	case head == "absent":
		return MarkerAbsent, 0, "", nil
	case head == "running":
		return MarkerRunning, 0, "", nil
	case strings.HasPrefix(head, "done "):
		code, err := strconv.Atoi(strings.TrimPrefix(head, "done "))
		if err != nil || code < 0 || code > maxExitStatus {
			return 0, 0, "", fmt.Errorf("marker exit status %q", head)
		}
		return MarkerDone, code, body, nil
	}
	return 0, 0, "", fmt.Errorf("marker answered %q", head)
}

// wrapper is the remote side: create the marker atomically or refuse,
// run the command detached (stdin: the arguments), record its exit status,
// and follow it until it ends so the caller sees the output and status.
func wrapper(id, command string) string {
	m := markerRoot + "/" + id
	return `set -u
root="` + markerRoot + `"; m="` + m + `"
mkdir -p "$root" || exit 1
mkdir "$m" 2>/dev/null || { echo "portcullis: execution ` + id + ` was started before" >&2; exit ` + strconv.Itoa(alreadyStarted) + `; }
cat > "$m/in"
nohup sh -c 'sh -c "$1" < "$2/in" > "$2/out" 2>&1; echo $? > "$2/exit.tmp"; mv "$2/exit.tmp" "$2/exit"' portcullis ` + shellQuote(command) + ` "$m" > /dev/null 2>&1 &
while [ ! -f "$m/exit" ]; do sleep 0.05; done
cat "$m/out"
exit "$(cat "$m/exit")"`
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func validID(id string) bool {
	if len(id) != 30 || !strings.HasPrefix(id, "act_") {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// limited keeps at most MaxResultBytes of output.
type limited struct{ w *bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if room := MaxResultBytes - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
