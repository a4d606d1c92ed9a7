package console

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"sync"
	"time"

	"github.com/portcullis-dev/portcullis/auth"
)

// Session limits.
const (
	sessionIdleMax     = time.Hour      // a session unused this long ends
	sessionLifetimeMax = 12 * time.Hour // and every session ends after this
	maxSessions        = 10_000         // beyond it the oldest session is dropped
	loginCookieMax     = 10 * time.Minute
	sessionCookie      = "portcullis_console"
	loginCookie        = "portcullis_console_login"
	cookiePath         = "/console/"
)

// session is one signed-in browser. It is the console's only in-process
// state: everything shown is read from the ledger and its views.
type session struct {
	id        string
	principal *auth.Principal // from the gateway's Authenticator; never nil
	csrf      string
	created   time.Time
	used      time.Time
	flash     flash
}

// flash is a one-time message shown after an action's redirect.
type flash struct {
	Kind string // "ok" or "error"
	Text string
}

// sessions is the server-side session map, keyed by a random id.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, now: now}
}

func randomToken() string { return rand.Text() }

// create starts a session for p.
func (s *sessions) create(p *auth.Principal) *session {
	now := s.now()
	ss := &session{id: randomToken(), principal: p, csrf: randomToken(), created: now, used: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.m) >= maxSessions {
		var oldest *session
		for _, x := range s.m {
			if oldest == nil || x.created.Before(oldest.created) {
				oldest = x
			}
		}
		delete(s.m, oldest.id)
	}
	s.m[ss.id] = ss
	return ss
}

func (s *sessions) expireLocked(now time.Time) {
	for id, x := range s.m {
		if x.expired(now) {
			delete(s.m, id)
		}
	}
}

func (x *session) expired(now time.Time) bool {
	return now.Sub(x.used) > sessionIdleMax || now.Sub(x.created) > sessionLifetimeMax
}

// get returns the live session of id and marks it used.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok {
		return nil, false
	}
	if x.expired(now) {
		delete(s.m, id)
		return nil, false
	}
	x.used = now
	return x, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// setFlash and takeFlash carry one message across a redirect.
func (s *sessions) setFlash(x *session, f flash) {
	s.mu.Lock()
	x.flash = f
	s.mu.Unlock()
}

func (s *sessions) takeFlash(x *session) flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := x.flash
	x.flash = flash{}
	return f
}

// fromRequest finds the request's session by its cookie.
func (s *sessions) fromRequest(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	return s.get(c.Value)
}

// cookie builds a console cookie: HttpOnly, SameSite=Strict, Secure when
// the request came over TLS, scoped to /console/.
func cookie(r *http.Request, name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: cookiePath, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	switch {
	case maxAge > 0:
		c.MaxAge = int(maxAge / time.Second)
	case maxAge < 0:
		c.MaxAge = -1
	}
	return c
}

// sameToken compares two CSRF tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
