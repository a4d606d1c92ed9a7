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
	tooLate         = 223 // wrapper exit status: the request arrived after its start-by time; nothing ran
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

// dial connects and authenticates, all of it by deadline (the TCP connect
// also within sshDialTimeout): a server that accepts the connection but
// stalls in the handshake does not hold the call past it.
func (SSH) dial(ctx context.Context, r SSHRequest, deadline time.Time) (*ssh.Client, net.Conn, error) {
	user, hostport, ok := strings.Cut(r.Target, "@")
	if !ok {
		return nil, nil, fmt.Errorf("ssh target %q: want user@host:port", r.Target)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "22")
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(r.HostKey))
	if err != nil {
		return nil, nil, fmt.Errorf("ssh host key for %s: %w (pin it in the config; there is no trust on first use)", hostport, err)
	}
	keyPEM, err := Credential(r.CredentialRef)
	if err != nil {
		return nil, nil, err
	}
	signer, err := ssh.ParsePrivateKey([]byte(keyPEM + "\n"))
	if err != nil {
		return nil, nil, fmt.Errorf("ssh key %s: unreadable", r.CredentialRef)
	}
	d := net.Dialer{Timeout: sshDialTimeout, Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, nil, err
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, nil, err
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, hostport, &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(pinned), Timeout: sshDialTimeout,
	})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return ssh.NewClient(cc, chans, reqs), conn, nil
}

// Do starts the command through the wrapper and waits for its exit
// status. The wrapper is told a start-by time (now + the tool's timeout):
// a request that reaches the remote side later (a server that stalled
// after accepting it) is refused there before anything runs, so a
// command never starts after its dispatch deadline, when a status query
// may already have proven its absence and a retry started anew. Connect,
// handshake and start are bounded by the same time. A failure before the
// start request was sent is NotSent; from then on it is Unknown (the
// marker tells later).
func (s SSH) Do(r SSHRequest) Outcome {
	if !validID(r.ExecutionID) {
		return Outcome{Observed: NotSent, Reason: "bad execution id"}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	startBy := time.Now().Add(timeout)
	c, conn, err := s.dial(context.Background(), r, startBy)
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
	if err := sess.Start(wrapper(r.ExecutionID, r.Command, startBy)); err != nil {
		return Outcome{Observed: Unknown, Reason: "ssh start: " + err.Error() + "; the start request may have reached the remote side (the marker will tell)"}
	}
	_ = conn.SetDeadline(time.Time{}) // started: the wait below bounds the rest
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Until(startBy)):
		return Outcome{Observed: Unknown, Reason: fmt.Sprintf("no exit status within %s; the command may still run (the marker will tell)", timeout)}
	}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return Outcome{Observed: Answered, Status: 0, Body: out.String(), ContentType: "text/plain"}
	case errors.As(err, &exit) && exit.ExitStatus() == alreadyStarted:
		return Outcome{Observed: Unknown, Reason: "the remote marker shows this execution was started before; it was not started again"}
	case errors.As(err, &exit) && exit.ExitStatus() == tooLate:
		return Outcome{Observed: Unknown, Reason: "the remote side refused to start the command after its start-by time"}
	case errors.As(err, &exit):
		return Outcome{Observed: Answered, Status: exit.ExitStatus(), Body: out.String(), ContentType: "text/plain"}
	}
	return Outcome{Observed: Unknown, Reason: "the connection dropped after the command started: " + err.Error()}
}

// Ask reads the marker of an execution (used before anything else after a
// dropped connection), within ctx's deadline (10 s without one). The
// output it reads back is capped like any result.
func (s SSH) Ask(ctx context.Context, r SSHRequest) (Marker, int, string, error) {
	if !validID(r.ExecutionID) {
		return 0, 0, "", errors.New("bad execution id")
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(sshDialTimeout)
	}
	c, conn, err := s.dial(ctx, r, deadline)
	if err != nil {
		return 0, 0, "", err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	sess, err := c.NewSession()
	if err != nil {
		return 0, 0, "", err
	}
	defer sess.Close()
	m := markerRoot + "/" + r.ExecutionID
	b, err := sess.Output(`m="` + m + `"; if [ ! -d "$m" ]; then echo absent; elif [ -f "$m/exit" ]; then echo "done $(cat "$m/exit")"; head -c ` + strconv.Itoa(MaxResultBytes+1) + ` "$m/out"; else echo running; fi`)
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
		text, _ := ResultText([]byte(body))
		return MarkerDone, code, text, nil
	}
	return 0, 0, "", fmt.Errorf("marker answered %q", head)
}

// wrapper is the remote side: create the marker atomically or refuse,
// run the command detached (stdin: the arguments), record its exit status,
// and follow it until it ends so the caller sees the output and status.
func wrapper(id, command string, startBy time.Time) string {
	m := markerRoot + "/" + id
	return `set -u
if [ "$(date +%s)" -gt ` + strconv.FormatInt(startBy.Unix(), 10) + ` ]; then echo "portcullis: execution ` + id + ` arrived after its start-by time; not started" >&2; exit ` + strconv.Itoa(tooLate) + `; fi
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
