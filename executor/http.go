// Package executor sends dispatched executions to their targets and says
// what it observed: a result (any status: errors are results too), proof
// that nothing left the process, or an unknown outcome. It never decides
// whether to send: the ledger does (DISPATCHED is appended before a byte
// leaves).
package executor

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Limits of the HTTP executor.
const (
	MaxResultBytes     = 64 << 10 // stored response body; longer bodies are cut and marked
	DefaultTimeout     = 30 * time.Second
	DefaultIdemHeader  = "Idempotency-Key"
	executionIDPattern = "{execution_id}"
)

// Observed is what one attempt observed.
type Observed int

// What an attempt can observe.
const (
	// Answered: the target answered; Status and Body hold the answer.
	Answered Observed = iota + 1
	// NotSent: the request failed before any byte was written.
	NotSent
	// Unknown: bytes were written, no answer came (timeout, reset).
	Unknown
)

// Outcome is one attempt's observation.
type Outcome struct {
	Observed    Observed
	Status      int
	Body        string
	ContentType string
	Truncated   bool
	Reason      string
}

// HTTPRequest is one dispatch to an http target.
type HTTPRequest struct {
	Method        string
	URL           string
	Body          []byte // JSON arguments
	ExecutionID   string
	IdemHeader    string // "" = Idempotency-Key
	CredentialRef string // "env:NAME" or "file:/path": sent as a bearer token
	Timeout       time.Duration
}

// HTTP sends requests with the stdlib client.
type HTTP struct {
	Client *http.Client
}

// NewHTTP returns an executor with a client that never follows redirects
// (a redirect is an answer to record, not a second request to send).
func NewHTTP() *HTTP {
	return &HTTP{Client: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64},
	}}
}

// Do sends the request once. It runs to its own deadline whatever the
// caller's connection does: an agent that goes away does not cancel a
// dispatch in progress.
func (h *HTTP) Do(r HTTPRequest) Outcome {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { wrote.Store(true) },
	})
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return Outcome{Observed: NotSent, Reason: "bad request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	hdr := r.IdemHeader
	if hdr == "" {
		hdr = DefaultIdemHeader
	}
	req.Header.Set(hdr, r.ExecutionID)
	if r.CredentialRef != "" {
		cred, err := Credential(r.CredentialRef)
		if err != nil {
			return Outcome{Observed: NotSent, Reason: err.Error()}
		}
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return Outcome{Observed: NotSent, Reason: "no byte left the process: " + err.Error()}
		}
		return Outcome{Observed: Unknown, Reason: "the request was handed over, no answer: " + err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
	if err != nil && len(body) == 0 && !errors.Is(err, io.EOF) {
		// The status line arrived: the target acted on the request.
		return Outcome{Observed: Answered, Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Reason: "body lost: " + err.Error()}
	}
	o := Outcome{Observed: Answered, Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	o.Body, o.Truncated = ResultText(body)
	return o
}

// ResultText is the stored form of a result body: at most MaxResultBytes,
// cut on a character boundary (truncated reports a cut), and valid UTF-8
// (the ledger's result fields are text: bytes that are not UTF-8 are
// replaced by U+FFFD rather than making the result unrecordable).
func ResultText(body []byte) (text string, truncated bool) {
	text = string(body)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if len(text) <= MaxResultBytes {
		return text, false
	}
	cut := MaxResultBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut-- // the rune straddles the cap: leave it out
	}
	return text[:cut], true
}

// StatusURL fills a status URL template with the execution id.
func StatusURL(template, executionID string) string {
	return strings.ReplaceAll(template, executionIDPattern, executionID)
}

// Credential reads a credential by reference; its value never reaches
// events, views, results or logs.
func Credential(ref string) (string, error) {
	switch {
	case strings.HasPrefix(ref, "env:"):
		v, ok := os.LookupEnv(ref[4:])
		if !ok || v == "" {
			return "", fmt.Errorf("credential %s: not set (the vault is locked for this tool)", ref)
		}
		return v, nil
	case strings.HasPrefix(ref, "file:"):
		b, err := os.ReadFile(ref[5:])
		if err != nil {
			return "", fmt.Errorf("credential %s: cannot be read (the vault is locked for this tool)", ref)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("credential %s: want env:NAME or file:/path", ref)
}
