package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits of what a caller may present.
const (
	// MaxTokenBytes is the longest bearer token accepted; longer ones are
	// refused before hashing.
	MaxTokenBytes = 512
	// MaxAuthorizationBytes is the longest Authorization header accepted.
	MaxAuthorizationBytes = len("Bearer ") + MaxTokenBytes
)

// ErrUnauthenticated: no credentials, or credentials no caller holds.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrPermissionDenied: the caller is known but may not do this.
var ErrPermissionDenied = errors.New("permission denied")

// Caller is one entry of the config's callers: section.
type Caller struct {
	Name string
	// TokenSHA256 is the SHA-256 (hex) of the caller's bearer token.
	TokenSHA256 string
	// CertSHA256 is the SHA-256 (hex) of the caller's client certificate
	// (DER), for mTLS; "" when the caller uses a token only.
	CertSHA256 string
	Roles      []Role
	ActsFor    []string
	Accounts   []string
}

// Authenticator maps presented credentials to principals. It keeps only
// digests: the tokens themselves are never stored.
type Authenticator struct {
	tokens map[[sha256.Size]byte]*Principal
	certs  map[[sha256.Size]byte]*Principal
	local  *Principal
}

// New builds an Authenticator from the configured callers. contractAccounts
// are the literal budget accounts of the tool contracts, which every
// executor may use. With no callers the Authenticator is in single-operator
// mode: every call is LocalOperator.
func New(callers []Caller, contractAccounts []string) (*Authenticator, error) {
	a := &Authenticator{tokens: map[[sha256.Size]byte]*Principal{}, certs: map[[sha256.Size]byte]*Principal{}}
	if len(callers) == 0 {
		a.local = &Principal{Name: LocalOperator, Roles: slices.Clone(Roles), Local: true}
		return a, nil
	}
	for _, c := range callers {
		if c.Name == "" || c.Name == LocalOperator {
			return nil, fmt.Errorf("caller name %q is reserved or empty", c.Name)
		}
		if c.TokenSHA256 == "" && c.CertSHA256 == "" {
			return nil, fmt.Errorf("caller %s: needs token_sha256 or cert_sha256", c.Name)
		}
		for _, r := range c.Roles {
			if !r.Valid() {
				return nil, fmt.Errorf("caller %s: unknown role %q", c.Name, r)
			}
		}
		p := &Principal{Name: c.Name, Roles: slices.Clone(c.Roles), ActsFor: slices.Clone(c.ActsFor)}
		if p.Has(Executor) {
			p.Accounts = append(slices.Clone(contractAccounts), c.Accounts...)
		}
		for _, d := range []struct {
			hexDigest string
			into      map[[sha256.Size]byte]*Principal
			what      string
		}{{c.TokenSHA256, a.tokens, "token_sha256"}, {c.CertSHA256, a.certs, "cert_sha256"}} {
			if d.hexDigest == "" {
				continue
			}
			k, err := digest(d.hexDigest)
			if err != nil {
				return nil, fmt.Errorf("caller %s: %s: %w", c.Name, d.what, err)
			}
			if prev, dup := d.into[k]; dup {
				return nil, fmt.Errorf("caller %s: %s is also %s's", c.Name, d.what, prev.Name)
			}
			d.into[k] = p
		}
	}
	return a, nil
}

// Local reports whether a is in single-operator mode (no callers).
func (a *Authenticator) Local() bool { return a.local != nil }

// Authenticate returns the principal of a request from its Authorization
// header and, when the connection is mTLS, its verified client certificate
// chain (leaf first). A bearer token, when present, decides alone; the
// certificate counts only when no Authorization header is sent.
func (a *Authenticator) Authenticate(authorization string, peerCerts []*x509.Certificate) (*Principal, error) {
	if a.local != nil {
		return a.local, nil
	}
	if authorization != "" {
		tok, err := ParseBearer(authorization)
		if err != nil {
			return nil, err
		}
		// A map lookup on the token's SHA-256: timing reveals nothing an
		// attacker can steer toward a real token.
		if p, ok := a.tokens[sha256.Sum256([]byte(tok))]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("%w: the bearer token belongs to no caller", ErrUnauthenticated)
	}
	if len(peerCerts) > 0 {
		if p, ok := a.certs[sha256.Sum256(peerCerts[0].Raw)]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("%w: the client certificate belongs to no caller", ErrUnauthenticated)
	}
	return nil, fmt.Errorf("%w: send Authorization: Bearer TOKEN", ErrUnauthenticated)
}

// ParseBearer returns the token of an Authorization header of the form
// "Bearer TOKEN" (RFC 6750 §2.1: the scheme is case-insensitive, the token
// is b64token characters). Anything else is ErrUnauthenticated.
func ParseBearer(header string) (string, error) {
	if len(header) > MaxAuthorizationBytes {
		return "", fmt.Errorf("%w: Authorization header longer than %d bytes", ErrUnauthenticated, MaxAuthorizationBytes)
	}
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization must be \"Bearer TOKEN\"", ErrUnauthenticated)
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrUnauthenticated)
	}
	if len(tok) > MaxTokenBytes {
		return "", fmt.Errorf("%w: bearer token longer than %d bytes", ErrUnauthenticated, MaxTokenBytes)
	}
	// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
	body := strings.TrimRight(tok, "=")
	if body == "" {
		return "", fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return "", fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
		}
	}
	return tok, nil
}

// digest decodes a 64-hex-digit SHA-256.
func digest(h string) ([sha256.Size]byte, error) {
	var k [sha256.Size]byte
	b, err := hex.DecodeString(strings.ToLower(h))
	if err != nil || len(b) != sha256.Size {
		return k, fmt.Errorf("want 64 hex digits (sha256sum), got %d characters", len(h))
	}
	copy(k[:], b)
	return k, nil
}
