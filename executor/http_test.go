package executor

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

const testID = "act_01M8MFY3Q2ABCDEFGHJKMNPQRS"

// listener is a raw TCP listener on 127.0.0.1 that does what each test
// needs with the one connection it accepts.
func listener(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return "http://" + ln.Addr().String() + "/op"
}

// readRequest reads the request's header block: the request reached the
// target.
func readRequest(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

func TestHTTPNotSentWhenNothingLeft(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/op"
	ln.Close() // nobody listens: the connection is refused before a byte is written
	o := NewHTTP().Do(HTTPRequest{URL: url, ExecutionID: testID, Timeout: 2 * time.Second})
	if o.Observed != NotSent {
		t.Fatalf("refused connection: %+v, want NotSent", o)
	}
	// A credential that cannot be read refuses before anything is sent.
	o = NewHTTP().Do(HTTPRequest{URL: url, ExecutionID: testID, CredentialRef: "env:PORTCULLIS_TEST_UNSET_CREDENTIAL"})
	if o.Observed != NotSent || !strings.Contains(o.Reason, "vault is locked") {
		t.Fatalf("missing credential: %+v", o)
	}
}

func TestHTTPUnknownAfterTheRequestLeft(t *testing.T) {
	reached := make(chan struct{}, 2)
	closesEarly := listener(t, func(c net.Conn) { // reads the request, closes without an answer
		readRequest(c)
		reached <- struct{}{}
		c.Close()
	})
	hangs := listener(t, func(c net.Conn) { // reads the request, never answers
		readRequest(c)
		reached <- struct{}{}
		io.Copy(io.Discard, c)
	})
	for name, url := range map[string]string{"closes early": closesEarly, "hangs": hangs} {
		o := NewHTTP().Do(HTTPRequest{URL: url, Body: []byte(`{"a":1}`), ExecutionID: testID, Timeout: 300 * time.Millisecond})
		select {
		case <-reached:
		default:
			t.Fatalf("%s: the request never reached the target", name)
		}
		if o.Observed != Unknown {
			t.Fatalf("%s: %+v, want Unknown", name, o)
		}
	}
}

func TestHTTPAnswerIsRecorded(t *testing.T) {
	big := strings.Repeat("x", MaxResultBytes+1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, big)
		case "/exact":
			io.WriteString(w, big[:MaxResultBytes])
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			t.Error("a redirect was followed")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":"busy"}`)
		}
	}))
	defer srv.Close()
	h := NewHTTP()
	o := h.Do(HTTPRequest{URL: srv.URL + "/big", ExecutionID: testID})
	if o.Observed != Answered || len(o.Body) != MaxResultBytes || !o.Truncated {
		t.Fatalf("a body over the cap: %d bytes, truncated %v, want %d and true", len(o.Body), o.Truncated, MaxResultBytes)
	}
	o = h.Do(HTTPRequest{URL: srv.URL + "/exact", ExecutionID: testID})
	if len(o.Body) != MaxResultBytes || o.Truncated {
		t.Fatalf("a body of exactly the cap: %d bytes, truncated %v", len(o.Body), o.Truncated)
	}
	o = h.Do(HTTPRequest{URL: srv.URL + "/redirect", ExecutionID: testID})
	if o.Observed != Answered || o.Status != http.StatusFound {
		t.Fatalf("redirect: %+v, want the 302 recorded", o)
	}
	o = h.Do(HTTPRequest{URL: srv.URL + "/error", ExecutionID: testID})
	if o.Observed != Answered || o.Status != http.StatusConflict || o.Body != `{"error":"busy"}` || o.ContentType != "application/json" {
		t.Fatalf("an error status is a result: %+v", o)
	}
}

func TestHTTPIdempotencyHeader(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	t.Setenv("PORTCULLIS_TEST_CREDENTIAL", "s3cret")
	for _, tc := range []struct{ configured, want string }{{"", "Idempotency-Key"}, {"X-Request-Id", "X-Request-Id"}} {
		o := NewHTTP().Do(HTTPRequest{URL: srv.URL, ExecutionID: testID, IdemHeader: tc.configured, CredentialRef: "env:PORTCULLIS_TEST_CREDENTIAL"})
		if o.Observed != Answered {
			t.Fatal(o)
		}
		h := <-got
		if h.Get(tc.want) != testID {
			t.Fatalf("header %s = %q, want the execution id", tc.want, h.Get(tc.want))
		}
		if tc.want != DefaultIdemHeader && h.Get(DefaultIdemHeader) != "" {
			t.Fatalf("idempotency_header %s configured, yet Idempotency-Key was sent too", tc.want)
		}
		if h.Get("Authorization") != "Bearer s3cret" {
			t.Fatalf("credential: %q", h.Get("Authorization"))
		}
	}
}

func TestStatusURL(t *testing.T) {
	if u := StatusURL("https://t.example/status/{execution_id}?x={execution_id}", testID); u != "https://t.example/status/"+testID+"?x="+testID {
		t.Fatal(u)
	}
}

// A result is text the ledger can record: cut on a character boundary
// within the cap, and bytes that are not UTF-8 replaced, never an
// unrecordable string.
func TestResultText(t *testing.T) {
	straddle := strings.Repeat("x", MaxResultBytes-1) + "é" // the é's second byte is past the cap
	for name, tc := range map[string]struct {
		body      string
		want      string
		truncated bool
	}{
		"short":           {`{"ok":1}`, `{"ok":1}`, false},
		"exactly the cap": {strings.Repeat("y", MaxResultBytes), strings.Repeat("y", MaxResultBytes), false},
		"rune at the cap": {straddle, strings.Repeat("x", MaxResultBytes-1), true},
		"not utf-8":       {"ok \xff\xfe done", "ok \uFFFD done", false},
	} {
		got, truncated := ResultText([]byte(tc.body))
		if got != tc.want || truncated != tc.truncated {
			t.Errorf("%s: %d bytes (truncated %v), want %d (%v)", name, len(got), truncated, len(tc.want), tc.truncated)
		}
	}
}

// FuzzResultText: target bodies are outside input. The stored form is
// always valid UTF-8 within the cap, and an untouched body when it was
// already both.
func FuzzResultText(f *testing.F) {
	f.Add([]byte(`{"ok":1}`), 0)
	f.Add([]byte("\xe2\x82"), MaxResultBytes-1)
	f.Add([]byte("\xff"), 10)
	f.Fuzz(func(t *testing.T, tail []byte, pad int) {
		if pad < 0 || pad > MaxResultBytes+8 {
			return
		}
		body := append([]byte(strings.Repeat("a", pad)), tail...)
		got, truncated := ResultText(body)
		if len(got) > MaxResultBytes || !utf8.ValidString(got) {
			t.Fatalf("%d bytes, valid %v", len(got), utf8.ValidString(got))
		}
		if utf8.Valid(body) && len(body) <= MaxResultBytes && (got != string(body) || truncated) {
			t.Fatal("a body within the cap was changed")
		}
		if truncated && !strings.HasPrefix(strings.ToValidUTF8(string(body), "\uFFFD"), got) {
			t.Fatal("the cut is not a prefix of the body")
		}
	})
}

// A GET (HEAD, DELETE, OPTIONS) tool's arguments travel as query
// parameters, not as a body the target never reads: the example tool
// get_release reads ?release_id= and got nothing. Strings as they are,
// numbers as written, booleans; nested values and nulls are refused
// before a byte leaves, and so is an argument that would replace a
// parameter the target URL fixes.
func TestHTTPQueryMethodsSendArgumentsAsQuery(t *testing.T) {
	type seen struct {
		method, query, contentType string
		body                       []byte
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RawQuery, r.Header.Get("Content-Type"), b}
	}))
	defer srv.Close()
	args := []byte(`{"release_id":"r8 & co","n":10.50,"big":9007199254740993,"dry":true}`)
	for _, m := range []string{"GET", "HEAD", "DELETE", "OPTIONS", "get"} {
		o := NewHTTP().Do(HTTPRequest{Method: m, URL: srv.URL + "/releases?region=eu", Body: args, ExecutionID: testID})
		if o.Observed != Answered {
			t.Fatalf("%s: %+v", m, o)
		}
		s := <-got
		if s.query != "big=9007199254740993&dry=true&n=10.50&region=eu&release_id=r8+%26+co" || len(s.body) != 0 || s.contentType != "" {
			t.Fatalf("%s: query %q, body %q, content type %q", m, s.query, s.body, s.contentType)
		}
	}
	// POST keeps the JSON body.
	if o := NewHTTP().Do(HTTPRequest{Method: "POST", URL: srv.URL + "/deploys", Body: args, ExecutionID: testID}); o.Observed != Answered {
		t.Fatal(o)
	}
	if s := <-got; s.query != "" || string(s.body) != string(args) || s.contentType != "application/json" {
		t.Fatalf("POST: %+v", s)
	}
	for args, want := range map[string]string{
		`{"ids":["a","b"]}`:     `"ids" is an array`,
		`{"filter":{"a":1}}`:    `"filter" is an object`,
		`{"release_id":null}`:   `"release_id" is null`,
		`{"region":"us"}`:       `"region" names a query parameter the tool's target fixes`,
		`["not","an","object"]`: `not a JSON object`,
	} {
		o := NewHTTP().Do(HTTPRequest{Method: "GET", URL: srv.URL + "/releases?region=eu", Body: []byte(args), ExecutionID: testID})
		if o.Observed != NotSent || !strings.Contains(o.Reason, want) {
			t.Fatalf("%s: %+v, want NotSent with %q", args, o, want)
		}
		select {
		case s := <-got:
			t.Fatalf("%s reached the target: %+v", args, s)
		default:
		}
	}
	// No arguments: the target URL as configured.
	if o := NewHTTP().Do(HTTPRequest{Method: "GET", URL: srv.URL + "/releases?region=eu", Body: []byte(`{}`), ExecutionID: testID}); o.Observed != Answered {
		t.Fatal(o)
	}
	if s := <-got; s.query != "region=eu" {
		t.Fatalf("no arguments: %+v", s)
	}
}

// A request is sent once even when it rides a reused keep-alive connection
// that the target drops after acting on it: net/http would send a request
// with an Idempotency-Key header (or with no body) again by itself, a second
// dispatch nobody recorded.
func TestHTTPSentOnceOnAReusedConnection(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/warm" {
			return // 200, the connection stays open for the next request
		}
		c, _, err := w.(http.Hijacker).Hijack() // acted on it, then the connection drops
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	h := NewHTTP()
	for _, method := range []string{http.MethodPost, http.MethodDelete, http.MethodGet} {
		for _, hdr := range []string{"", "X-Request-Id"} {
			if o := h.Do(HTTPRequest{Method: method, URL: srv.URL + "/warm", ExecutionID: testID}); o.Status != http.StatusOK {
				t.Fatalf("warm-up: %+v", o)
			}
			path := "/op/" + strings.ToLower(method) + hdr
			o := h.Do(HTTPRequest{Method: method, URL: srv.URL + path, Body: []byte(`{"a":1}`), ExecutionID: testID, IdemHeader: hdr, Timeout: 5 * time.Second})
			if method == http.MethodPost && hdr == "" {
				// and a POST without a body
				mu.Lock()
				hits["POST /op/post"] = 0
				mu.Unlock()
				h.Do(HTTPRequest{Method: method, URL: srv.URL + "/warm", ExecutionID: testID})
				o = h.Do(HTTPRequest{Method: method, URL: srv.URL + path, ExecutionID: testID, Timeout: 5 * time.Second})
			}
			mu.Lock()
			n := hits[method+" "+path]
			mu.Unlock()
			if n != 1 || o.Observed != Unknown {
				t.Errorf("%s with header %q: the target saw it %d times, outcome %+v; want once, Unknown", method, hdr, n, o)
			}
		}
	}
	// A request without a body on a method that carries one goes on a
	// fresh connection (sent as Content-Length 0, not chunked).
	var mu2 sync.Mutex
	var sent []string
	plain := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu2.Lock()
		sent = append(sent, fmt.Sprint(r.Method, " ", r.ContentLength, " ", r.TransferEncoding))
		mu2.Unlock()
	}))
	defer plain.Close()
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		h.Do(HTTPRequest{Method: m, URL: plain.URL, ExecutionID: testID})
	}
	mu2.Lock()
	if want := []string{"POST 0 []", "DELETE 0 []"}; !slices.Equal(sent, want) {
		t.Errorf("bodiless requests were sent as %q, want %q", sent, want)
	}
	mu2.Unlock()
	// A status query may be asked again: asking changes nothing.
	h.Do(HTTPRequest{Method: http.MethodGet, URL: srv.URL + "/warm", ExecutionID: testID})
	h.Do(HTTPRequest{Method: http.MethodGet, URL: srv.URL + "/status", ExecutionID: testID, Query: true, Timeout: 5 * time.Second})
	mu.Lock()
	defer mu.Unlock()
	if n := hits["GET /status"]; n != 2 {
		t.Errorf("status query asked %d times on a dropped reused connection, want 2 (the transport asks again)", n)
	}
}

// FreshConnection never reuses a connection.
func TestHTTPFreshConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	h := NewHTTP()
	for range 3 {
		h.Do(HTTPRequest{URL: srv.URL, ExecutionID: testID, FreshConnection: true})
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("3 fresh requests used %d connections", n)
	}
	for range 3 {
		h.Do(HTTPRequest{URL: srv.URL, Body: []byte(`{}`), ExecutionID: testID})
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("3 pooled requests after 3 fresh ones: %d connections in all, want 4", n)
	}
}
