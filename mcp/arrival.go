package mcp

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// When a request arrived. Delivery evidence is "a later request on the
// same session or connection, after the response completed", so a
// request's arrival must be when its bytes arrived, not when its handler
// started: Go's HTTP/1.1 server runs a pipelined request (sent before the
// previous response was read) only after that response was written, so
// its handler starts after the response completed although the agent
// never read it. The listener's connections (TrackArrivals, below any
// TLS) record when their reads returned data:
//
//   - a read that started with nothing waiting in the kernel (FIONREAD
//     is 0) waited for its bytes: they arrived as it returned;
//   - a read that found bytes waiting took bytes that arrived after the
//     queue was last seen empty (a lower bound: earlier is the safe side);
//   - the front door marks the end of each request's body; the first read
//     that returns data after the mark holds the next request's first
//     bytes, and the server's ConnState(StateActive), called once the
//     next request's head was parsed and before its handler (and before
//     anything reads its body), fixes that as the request's arrival;
//   - when no read returned data since the mark, the server parsed the
//     head from its buffers: it came in with the previous request's
//     bytes, and its arrival is that read's (before the previous response
//     completed: no evidence for it).
//
// Not recognised: a client that sends part of its next request before
// the response completed (so that it lands in the server's buffer with
// the previous request) and the rest after it; the arrival is then the
// rest's.
//
// HTTP/2 requests get no arrival time: streams are concurrent, and which
// bytes of the connection a stream's request came in is not known here.
// A connection the listener did not wrap (or a platform without FIONREAD)
// gives none either. Without an arrival time a request is no evidence of
// receipt (acknowledgements and resumed streams still are).

// TrackArrivals wraps a TCP listener (before any TLS listener wraps it)
// so its connections record when their reads returned data. The server
// must set ConnContext(…) and ConnState(…) of this package.
func TrackArrivals(ln net.Listener) net.Listener { return arrivalListener{ln} }

type arrivalListener struct{ net.Listener }

func (l arrivalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	ac := &arrivalConn{Conn: c, id: connIDs.Add(1)}
	ac.lastEmpty = time.Now() // no byte arrived before the connection did
	if sc, ok := c.(syscall.Conn); ok {
		ac.raw, _ = sc.SyscallConn()
	}
	return ac, nil
}

var connIDs atomic.Uint64

// arrivalConn is one accepted connection that records its reads.
type arrivalConn struct {
	net.Conn
	id  uint64
	raw syscall.RawConn // nil: the kernel's queue cannot be asked

	mu        sync.Mutex
	lastEmpty time.Time // the latest moment the kernel's receive queue was seen empty
	lastRead  time.Time // arrival of the bytes of the latest read that returned any
	afterMark time.Time // arrival of the first bytes read since the mark (zero: none)
	straddle  time.Time // lastRead when the mark was set
	head      time.Time // the current request's arrival (set at StateActive; zero between requests)

	reset  atomic.Bool // a read found the connection reset by the agent (a TCP RST)
	closed atomic.Bool // closed here: its descriptor is not asked any more
}

// queueEmpty reports whether the kernel holds no received bytes for this
// connection (false when it cannot tell).
func (c *arrivalConn) queueEmpty() bool {
	if c.raw == nil {
		return false
	}
	n := -1
	if c.raw.Control(func(fd uintptr) { n = pendingBytes(fd) }) != nil {
		return false
	}
	return n == 0
}

func (c *arrivalConn) Read(p []byte) (int, error) {
	start := time.Now()
	empty := c.queueEmpty()
	if empty {
		c.mu.Lock()
		if start.After(c.lastEmpty) {
			c.lastEmpty = start
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, syscall.ECONNRESET) {
		c.reset.Store(true)
	}
	if n == 0 && err != nil && c.queueEmpty() {
		// A read that ended without data: the server aborting its
		// background read once it has written the response out (after the
		// response completed). Nothing waits now, so whatever a later read
		// finds waiting arrived after this moment, not before the queue was
		// last seen empty during the handler.
		now := time.Now()
		c.mu.Lock()
		if now.After(c.lastEmpty) {
			c.lastEmpty = now
		}
		c.mu.Unlock()
	}
	if n > 0 {
		now := time.Now()
		c.mu.Lock()
		at := c.lastEmpty // bytes that were waiting arrived after the queue was last seen empty
		if empty {
			at = now // the read waited for them
		}
		c.lastRead = at
		if c.afterMark.IsZero() {
			c.afterMark = at
		}
		c.mu.Unlock()
	}
	return n, err
}

// Close closes the connection; it is not asked about afterwards.
func (c *arrivalConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// peerReset reports whether the agent reset the connection (a TCP RST):
// seen by a read, or, while the connection is open here, in the socket's
// state, before any read of the server's noticed it. An agent that closes
// a connection with received bytes unread resets it, so a response
// written there was not all read, whatever the agent sends next.
func (c *arrivalConn) peerReset() bool {
	if c.reset.Load() {
		return true
	}
	if c.raw == nil || c.closed.Load() {
		return false
	}
	reset := false
	if c.raw.Control(func(fd uintptr) { reset = socketReset(fd) }) != nil {
		return c.reset.Load()
	}
	return reset || c.reset.Load()
}

// mark: the current request's body was read to its end; bytes read from
// now on are the next request's.
func (c *arrivalConn) mark() {
	c.mu.Lock()
	c.straddle, c.afterMark = c.lastRead, time.Time{}
	c.mu.Unlock()
}

func (c *arrivalConn) state(s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateActive:
		// The head was parsed. No read since the mark: it came from the
		// server's (or the TLS layer's) buffers, read with the bytes
		// before it.
		c.head = c.afterMark
		if c.head.IsZero() {
			c.head = c.straddle
		}
	default:
		c.head = time.Time{}
	}
}

// arrival is when the current request's first bytes arrived (zero: not
// known).
func (c *arrivalConn) arrival() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head
}

func arrivalConnOf(c net.Conn) *arrivalConn {
	switch c := c.(type) {
	case *arrivalConn:
		return c
	case *tls.Conn:
		ac, _ := c.NetConn().(*arrivalConn)
		return ac
	}
	return nil
}

type arrivalKey struct{}

// ConnContext is an http.Server's ConnContext that puts a tracked
// connection (TrackArrivals) in its requests' context, after next (nil:
// none).
func ConnContext(next func(context.Context, net.Conn) context.Context) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		if ac := arrivalConnOf(c); ac != nil {
			ctx = context.WithValue(ctx, arrivalKey{}, ac)
		}
		return ctx
	}
}

// ConnState is an http.Server's ConnState: it tells a tracked connection
// when the server parsed a request's head (StateActive), before its
// handler runs.
func ConnState(c net.Conn, s http.ConnState) {
	if ac := arrivalConnOf(c); ac != nil {
		ac.state(s)
	}
}

func connOf(r *http.Request) *arrivalConn {
	ac, _ := r.Context().Value(arrivalKey{}).(*arrivalConn)
	return ac
}

// arrivalAgeHeader carries, on a request forwarded to its session's
// owner, how long before the forward the request arrived at the
// forwarding gateway ("unknown": no arrival time). An age, not a time:
// the gateways' clocks need not agree.
const arrivalAgeHeader = "X-Portcullis-Arrival-Age"

// requestArrival is when r arrived (zero: not known; no evidence), and
// whether it came forwarded from another gateway (then its connection is
// that gateway's, shared by many agents: no same-connection evidence).
func requestArrival(r *http.Request) (at time.Time, forwarded bool) {
	ac := connOf(r)
	if ac != nil && r.ProtoMajor == 1 {
		at = ac.arrival()
	}
	age, forwarded := r.Header[arrivalAgeHeader]
	if !forwarded {
		return at, false
	}
	ns, err := strconv.ParseInt(firstOf(age), 10, 64)
	if err != nil || ns < 0 {
		return time.Time{}, true
	}
	if at.IsZero() {
		// Between gateways (HTTP/2, say): the forward itself is not
		// pipelined by the agent; its age says when the agent's bytes
		// reached the other gateway.
		at = time.Now()
	}
	return at.Add(-time.Duration(ns)), true
}

// responseConn is the agent's own connection r's response goes out on
// (nil: not known here, or the connection of another gateway that
// forwarded r, which carries many agents' requests; or HTTP/2, where a
// reset of the connection says nothing of one stream).
func responseConn(r *http.Request) *arrivalConn {
	if _, forwarded := r.Header[arrivalAgeHeader]; forwarded || r.ProtoMajor != 1 {
		return nil
	}
	return connOf(r)
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// CloseWrite half-closes the connection as the server's closeWriteAndWait
// expects of a TCP connection.
func (c *arrivalConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
