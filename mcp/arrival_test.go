package mcp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// arrivalServer serves HTTP/1.1 on a tracked listener; its handler reads
// the body, notes the request's arrival and when its response was
// written, and marks the end of the body, as the front door does.
type arrivalServer struct {
	addr string
	mu   sync.Mutex
	seen []arrivalSeen
}

type arrivalSeen struct {
	arrived, completed time.Time
}

func newArrivalServer(t *testing.T, hold time.Duration) *arrivalServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &arrivalServer{addr: ln.Addr().String()}
	srv := &http.Server{ConnContext: ConnContext(nil), ConnState: ConnState,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			at, _ := requestArrival(r)
			connOf(r).mark()
			time.Sleep(hold)        // the handler's work
			completed := time.Now() // as the front door: when the last write began
			w.Write([]byte("ok"))
			w.(http.Flusher).Flush()
			s.mu.Lock()
			s.seen = append(s.seen, arrivalSeen{at, completed})
			s.mu.Unlock()
		})}
	go srv.Serve(TrackArrivals(ln))
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *arrivalServer) got(i int) arrivalSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[i]
}

func post(body string) string {
	return fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// A request's arrival is when its bytes arrived, not when its handler
// started: requests pipelined behind one another (in one write, or
// written while the previous one is handled) arrived before the previous
// response completed; one sent after the response was read arrived after.
func TestArrivalOfPipelinedRequests(t *testing.T) {
	s := newArrivalServer(t, 50*time.Millisecond)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	read := func() {
		t.Helper()
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// 0 and 1 in one write; 2 written while 1 is handled.
	if _, err := io.WriteString(c, post(`{"n":0}`)+post(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	read()
	time.Sleep(10 * time.Millisecond) // 1 is being handled
	if _, err := io.WriteString(c, post(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	read()
	read()
	// 3 after reading every response.
	if _, err := io.WriteString(c, post(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	read()
	for i, want := range []bool{false, false, true} { // request i+1 arrived after response i completed
		prev, next := s.got(i), s.got(i+1)
		if next.arrived.IsZero() {
			t.Fatalf("request %d: no arrival", i+1)
		}
		if after := next.arrived.After(prev.completed); after != want {
			t.Errorf("request %d arrived %v after response %d completed, want %v (arrived %s, completed %s)",
				i+1, after, i, want, next.arrived.Format(time.StampMicro), prev.completed.Format(time.StampMicro))
		}
	}
}

// HTTP/2 streams are concurrent: a request on one may have been sent
// before another stream's response completed, so it gets no arrival time
// (and is no evidence of receipt).
func TestArrivalNoneOverHTTP2(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, ConnContext: ConnContext(nil), ConnState: ConnState,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			at, _ := requestArrival(r)
			if r.ProtoMajor != 2 {
				t.Errorf("HTTP/%d", r.ProtoMajor)
			}
			got <- at
		})}
	go srv.Serve(TrackArrivals(ln))
	defer srv.Close()
	cp := new(http.Protocols)
	cp.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: cp}}
	resp, err := c.Post("http://"+ln.Addr().String()+"/", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if at := <-got; !at.IsZero() {
		t.Fatalf("an HTTP/2 request has an arrival time: %v", at)
	}
}
