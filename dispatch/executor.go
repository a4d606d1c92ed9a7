package dispatch

import (
	"context"
	"net/http"
	"time"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/executor"
)

// Executor performs attempts on one channel. The driver calls Send only
// after it won DISPATCHED, and Status only for an execution whose outcome
// is unknown.
type Executor interface {
	// Send performs one attempt; the execution id travels as the
	// target's idempotency key. It runs to the tool's own timeout.
	Send(t config.Tool, executionID string, args []byte) executor.Outcome
	// Status asks the target (status endpoint, durable marker) what became
	// of the execution.
	Status(ctx context.Context, t config.Tool, executionID string) Status
}

// Checker is an Executor that can tell, before anything is recorded,
// that it could never send a call's arguments (Driver.Begin refuses the
// call then, and nothing is recorded or sent).
type Checker interface {
	Check(t config.Tool, args []byte) error
}

// Finding is what a status query found at the target.
type Finding int

// Status query findings.
const (
	Unsettled Finding = iota // the target could not settle it (no status endpoint, an error, an unclear answer)
	Running                  // the target is still working on it
	Absent                   // the target shows no trace of it
	Done                     // the target performed it; Code and Body are its answer
)

// Status is a status query's answer.
type Status struct {
	Finding Finding
	Code    int
	Body    string
	// Evidence says what was asked and what it answered.
	Evidence string
}

// markerAskMax bounds asking an SSH host's marker after a dropped connection.
const markerAskMax = 10 * time.Second

// HTTPExecutor sends http tools with the execution id as Idempotency-Key
// and asks the contract's status_url.
type HTTPExecutor struct{ Client *executor.HTTP }

var _ Executor = HTTPExecutor{}

// Send performs one HTTP request.
func (h HTTPExecutor) Send(t config.Tool, id string, args []byte) executor.Outcome {
	return h.Client.Do(executor.HTTPRequest{Method: t.Method, URL: t.Target, Body: args, ExecutionID: id,
		IdemHeader: t.IdempotencyHeader, CredentialRef: t.CredentialRef, Timeout: t.Timeout,
		FreshConnection: t.Contract.Retry == contract.Irreversible})
}

// Check refuses arguments a GET, HEAD, DELETE or OPTIONS tool cannot send
// as query parameters (executor.QueryArgs): nested values, nulls, or a
// name the target URL's query fixes.
func (h HTTPExecutor) Check(t config.Tool, args []byte) error {
	if !executor.QueryMethod(t.Method) {
		return nil
	}
	_, err := executor.QueryURL(t.Target, args)
	return err
}

// Status asks the status endpoint: 2xx is done, 404 is absent.
func (h HTTPExecutor) Status(_ context.Context, t config.Tool, id string) Status {
	if t.StatusURL == "" {
		return Status{Evidence: "the contract names no status_url"}
	}
	o := h.Client.Do(executor.HTTPRequest{Method: http.MethodGet, URL: executor.StatusURL(t.StatusURL, id), ExecutionID: id,
		IdemHeader: t.IdempotencyHeader, CredentialRef: t.CredentialRef, Timeout: t.Timeout, Query: true})
	ev := "the status endpoint answered " + itoa(o.Status)
	switch {
	case o.Observed == executor.Answered && o.Status >= 200 && o.Status < 300:
		return Status{Finding: Done, Code: o.Status, Body: o.Body, Evidence: ev}
	case o.Observed == executor.Answered && o.Status == http.StatusNotFound:
		return Status{Finding: Absent, Evidence: "the status endpoint answered 404 (no such request)"}
	}
	return Status{Evidence: "the status endpoint did not settle it (" + itoa(o.Status) + " " + o.Reason + ")"}
}

// SSHExecutor runs ssh tools through the remote wrapper and its durable
// marker.
type SSHExecutor struct{ Client executor.SSH }

var _ Executor = SSHExecutor{}

func sshRequest(t config.Tool, id string, args []byte) executor.SSHRequest {
	return executor.SSHRequest{Target: t.Target, HostKey: t.HostKey, CredentialRef: t.CredentialRef, Command: t.Command,
		ExecutionID: id, Stdin: args, Timeout: t.Timeout}
}

// Send runs the command once; after a dropped connection it asks the
// marker before anything else.
func (s SSHExecutor) Send(t config.Tool, id string, args []byte) executor.Outcome {
	r := sshRequest(t, id, args)
	o := s.Client.Do(r)
	if o.Observed != executor.Unknown {
		return o
	}
	ctx, cancel := context.WithTimeout(context.Background(), markerAskMax)
	defer cancel()
	switch m, code, out, err := s.Client.Ask(ctx, r); {
	case err != nil:
		o.Reason += "; the marker could not be asked: " + err.Error()
	case m == executor.MarkerDone:
		return executor.Outcome{Observed: executor.Answered, Status: code, Body: out, ContentType: "text/plain"}
	case m == executor.MarkerAbsent:
		return executor.Outcome{Observed: executor.NotSent, Reason: "the remote marker shows the command never started"}
	}
	return o
}

// Status asks the remote marker.
func (s SSHExecutor) Status(ctx context.Context, t config.Tool, id string) Status {
	m, code, out, err := s.Client.Ask(ctx, sshRequest(t, id, nil))
	switch {
	case err != nil:
		return Status{Evidence: "the remote marker could not be asked (" + err.Error() + ")"}
	case m == executor.MarkerRunning:
		return Status{Finding: Running, Evidence: "the remote marker shows the command still running"}
	case m == executor.MarkerAbsent:
		return Status{Finding: Absent, Evidence: "the remote marker shows no such command"}
	}
	return Status{Finding: Done, Code: code, Body: out, Evidence: "the remote marker shows exit status " + itoa(code)}
}
