package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"runtime"
	"sync/atomic"

	"filippo.io/edwards25519"
)

// Presigner makes Ed25519 signatures whose costly half is made ahead of
// time, off the path of the commit that needs them. They are ordinary
// Ed25519 signatures: crypto/ed25519.Verify, audit verify and every
// gateway check them as before.
//
// A signature is R || S, with R = rB for a secret nonce r and
// S = r + SHA-512(R || A || M)·a mod l (a the secret scalar, A the public
// key). RFC 8032 derives r from the message, so rB, a scalar
// multiplication and most of a signature's cost (about 30 µs here),
// cannot start before the message is known. The verification equation
// holds for any r; what the scheme needs is that r is secret and never
// used for two messages. So a Presigner keeps nonces with their points
// made in advance, and a signature takes one, hashes and does one scalar
// multiply-add: a couple of microseconds.
//
// Each nonce is SHA-512(prefix || 32 fresh random bytes) reduced mod l,
// prefix being the secret half of the key's hash that RFC 8032 mixes into
// its own nonces: unpredictable to anyone without the key, whatever the
// random bytes. A nonce leaves the pool once, is used for one signature
// and is cleared; two messages signed with one nonce would give the key
// away.
type Presigner struct {
	pub    ed25519.PublicKey
	a      edwards25519.Scalar
	prefix [32]byte

	pool      chan *nonce
	refilling atomic.Bool
}

type nonce struct {
	r edwards25519.Scalar
	R [32]byte // rB, encoded
}

// presignDepth is how many nonces a Presigner keeps ready; it refills
// when half are used. A commit group takes one, so this covers bursts of
// groups, not of events.
const presignDepth = 64

// NewPresigner signs with key. Its pool fills on first use.
func NewPresigner(key ed25519.PrivateKey) *Presigner {
	h := sha512.Sum512(key.Seed())
	p := &Presigner{pub: key.Public().(ed25519.PublicKey), pool: make(chan *nonce, presignDepth)}
	if _, err := p.a.SetBytesWithClamping(h[:32]); err != nil {
		panic(err) // 32 bytes are never refused
	}
	copy(p.prefix[:], h[32:])
	return p
}

// Public is the key that verifies p's signatures.
func (p *Presigner) Public() ed25519.PublicKey { return p.pub }

// Sign signs msg. An empty pool is no error: the nonce is then made here,
// which costs what crypto/ed25519.Sign does.
func (p *Presigner) Sign(msg []byte) []byte {
	var n *nonce
	select {
	case n = <-p.pool:
	default:
		n = p.newNonce()
	}
	if len(p.pool) <= presignDepth/2 && p.refilling.CompareAndSwap(false, true) {
		go p.refill()
	}
	var digest [sha512.Size]byte
	h := sha512.New()
	h.Write(n.R[:])
	h.Write(p.pub)
	h.Write(msg)
	k, err := new(edwards25519.Scalar).SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic(err) // 64 bytes are never refused
	}
	s := new(edwards25519.Scalar).MultiplyAdd(k, &p.a, &n.r)
	n.r = edwards25519.Scalar{}
	sig := make([]byte, 0, ed25519.SignatureSize)
	return append(append(sig, n.R[:]...), s.Bytes()...)
}

// refill fills the pool, one nonce at a time, yielding between them so
// that the goroutines of a commit in progress run first. It is the pool's
// only writer (refilling), so a send never finds the pool full.
func (p *Presigner) refill() {
	defer p.refilling.Store(false)
	for len(p.pool) < presignDepth {
		p.pool <- p.newNonce()
		runtime.Gosched()
	}
}

func (p *Presigner) newNonce() *nonce {
	var z [32]byte
	rand.Read(z[:]) // never fails (crypto/rand)
	var digest [sha512.Size]byte
	h := sha512.New()
	h.Write(p.prefix[:])
	h.Write(z[:])
	n := new(nonce)
	if _, err := n.r.SetUniformBytes(h.Sum(digest[:0])); err != nil {
		panic(err)
	}
	copy(n.R[:], new(edwards25519.Point).ScalarBaseMult(&n.r).Bytes())
	return n
}
