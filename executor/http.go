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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
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
	Body          []byte // JSON arguments; the query of a GET, HEAD, DELETE or OPTIONS request (QueryMethod)
	ExecutionID   string
	IdemHeader    string // "" = Idempotency-Key
	CredentialRef string // "env:NAME" or "file:/path": sent as a bearer token
	Timeout       time.Duration
	// Query marks a status query: asking twice changes nothing, so the
	// transport may send it again on a fresh connection when a reused one
	// fails. Every other request is sent at most once.
	Query bool
	// FreshConnection sends the request on a new connection, never on one
	// the target may be closing as an idle keep-alive (irreversible tools:
	// such a race would leave an outcome unknown that only a person can
	// settle).
	FreshConnection bool
}

// HTTP sends requests with the stdlib client.
type HTTP struct {
	Client *http.Client
	// Fresh is the client for FreshConnection requests (nil: Client).
	Fresh *http.Client
}

// NewHTTP returns an executor with clients that never follow redirects
// (a redirect is an answer to record, not a second request to send).
func NewHTTP() *HTTP {
	client := func(keepAlive bool) *http.Client {
		return &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64,
				DisableKeepAlives: !keepAlive},
		}
	}
	return &HTTP{Client: client(true), Fresh: client(false)}
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
	target, reqBody := r.URL, io.Reader(bytes.NewReader(r.Body))
	if QueryMethod(method) {
		// No body a target would read: the arguments are the query.
		u, err := QueryURL(r.URL, r.Body)
		if err != nil {
			return Outcome{Observed: NotSent, Reason: "nothing was sent: " + err.Error()}
		}
		target, reqBody = u, http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reqBody)
	if err != nil {
		return Outcome{Observed: NotSent, Reason: "bad request: " + err.Error()}
	}
	if reqBody != http.NoBody {
		req.Header.Set("Content-Type", "application/json")
	}
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
	fresh := r.FreshConnection
	if !r.Query && !once(req) {
		fresh = true // never on a reused connection, so never resent by the transport
	}
	c := h.Client
	if fresh && h.Fresh != nil {
		c = h.Fresh
	}
	resp, err := c.Do(req)
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

// once makes req one the transport sends at most once. net/http sends a
// request again by itself when a reused keep-alive connection fails before
// any answer, if it thinks the request replayable: a GET, or any request
// carrying an Idempotency-Key header whose body it can rewind. That second
// send would be a dispatch the ledger never recorded (and a second effect
// at a target that ignores the key). A body without GetBody is not
// rewindable, so the transport gives the error back instead. A request
// with no body gets an empty one the transport probes and sends as none
// (GET, HEAD, DELETE, OPTIONS); on a method that carries a body it would
// be sent chunked instead of as Content-Length 0, so once leaves such a
// request as it is and reports false: it must go on a fresh connection,
// which the transport never resends on.
func once(req *http.Request) bool {
	req.GetBody = nil
	if req.Body != nil && req.Body != http.NoBody {
		return true
	}
	if !QueryMethod(req.Method) {
		return false
	}
	req.Body = io.NopCloser(bytes.NewReader(nil))
	return true
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
	return CutText(text, MaxResultBytes), true
}

// CutText is text cut to at most n bytes on a character boundary: a rune
// that straddles n is left out.
func CutText(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// QueryMethod reports whether an http tool's arguments travel as query
// parameters: GET, HEAD, DELETE and OPTIONS requests carry no body a
// target reads (a GET tool whose arguments went as a JSON body reached
// its target without them).
func QueryMethod(method string) bool {
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// QueryArgs are a call's arguments (a JSON object; empty or null: none)
// as query parameters: a string as it is, a number as written in the
// call (its exact digits), a boolean as true or false. A null, an array
// or an object has no agreed query form, so it is refused (send nested
// data with a method that has a body, or as a string the target decodes).
func QueryArgs(args []byte) (url.Values, error) {
	q := url.Values{}
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		return q, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("arguments are not a JSON object: %w", err)
	}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			q.Set(k, v)
		case json.Number:
			q.Set(k, v.String())
		case bool:
			q.Set(k, strconv.FormatBool(v))
		default:
			kind := "null"
			switch v.(type) {
			case []any:
				kind = "an array"
			case map[string]any:
				kind = "an object"
			}
			return nil, fmt.Errorf("argument %q is %s: a GET, HEAD, DELETE or OPTIONS tool sends its arguments as query parameters, strings, numbers and booleans only", k, kind)
		}
	}
	return q, nil
}

// QueryURL is target with the arguments added to its query (QueryArgs).
// An argument named like a parameter the target URL fixes is refused: the
// config's value is not the agent's to replace.
func QueryURL(target string, args []byte) (string, error) {
	q, err := QueryArgs(args)
	if err != nil || len(q) == 0 {
		return target, err
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("target %q: %w", target, err)
	}
	fixed := u.Query()
	for k, vs := range q {
		if fixed.Has(k) {
			return "", fmt.Errorf("argument %q names a query parameter the tool's target fixes", k)
		}
		fixed[k] = vs
	}
	u.RawQuery = fixed.Encode()
	return u.String(), nil
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
