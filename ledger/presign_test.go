package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
)

// A presigned signature is an Ed25519 signature like any other: the
// standard library verifies it, over this message and no other, and under
// this key and no other; from the pool or with a nonce made on the spot.
func TestPresignerSignaturesVerify(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	p := NewPresigner(key)
	if !p.Public().Equal(pub) {
		t.Fatal("the presigner's public key is not the key's")
	}
	for i := range 3 * presignDepth {
		msg := fmt.Appendf(nil, "message %d", i)
		sig := p.Sign(msg)
		if len(sig) != ed25519.SignatureSize {
			t.Fatalf("signature %d: %d bytes", i, len(sig))
		}
		if !ed25519.Verify(pub, msg, sig) {
			t.Fatalf("signature %d does not verify", i)
		}
		if ed25519.Verify(pub, append(msg, '!'), sig) {
			t.Fatalf("signature %d verifies another message", i)
		}
		if ed25519.Verify(otherPub, msg, sig) {
			t.Fatalf("signature %d verifies under another key", i)
		}
	}
	// The pool empty: the nonce is made on the spot.
	q := NewPresigner(key)
	q.refilling.Store(true) // no refill: every signature takes the slow way
	for i := range 8 {
		msg := fmt.Appendf(nil, "cold %d", i)
		if len(q.pool) != 0 {
			t.Fatal("a pool filled without a refill")
		}
		if !ed25519.Verify(pub, msg, q.Sign(msg)) {
			t.Fatalf("a signature with a nonce made on the spot does not verify")
		}
	}
}

// No nonce serves two signatures, however many goroutines sign at once:
// a repeated R (the nonce's point) would give the key away.
func TestPresignerNeverReusesANonce(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	p := NewPresigner(key)
	const signers, each = 8, 500
	var mu sync.Mutex
	seen := make(map[[32]byte]string, signers*each)
	var wg sync.WaitGroup
	for g := range signers {
		wg.Go(func() {
			for i := range each {
				msg := fmt.Appendf(nil, "%d/%d", g, i)
				sig := p.Sign(msg)
				if !ed25519.Verify(pub, msg, sig) {
					t.Errorf("signature of %s does not verify", msg)
					return
				}
				mu.Lock()
				if prev, dup := seen[[32]byte(sig[:32])]; dup {
					t.Errorf("one nonce signed %s and %s", prev, msg)
				}
				seen[[32]byte(sig[:32])] = string(msg)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Two presigners of one key (two gateway processes restarted with the
	// same key file) draw different nonces too.
	q := NewPresigner(key)
	for i := range presignDepth {
		sig := q.Sign(fmt.Appendf(nil, "second %d", i))
		if prev, dup := seen[[32]byte(sig[:32])]; dup {
			t.Fatalf("a second presigner reused the nonce of %s", prev)
		}
	}
}

// A group signed by a presigner verifies event by event, as one signed
// with the key.
func TestPresignerSignGroupVerifies(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	p := NewPresigner(key)
	for _, n := range []int{1, 2, 7, 64} {
		hashes := make([][]byte, n)
		for i := range hashes {
			h := sha256.Sum256(fmt.Appendf(nil, "event %d of %d", i, n))
			hashes[i] = h[:]
		}
		gs := p.SignGroup(hashes)
		for i, h := range hashes {
			root, ok := groupRoot(h, gs.Paths[i], uint64(i), uint64(n))
			if !ok || !ed25519.Verify(pub, groupMessage(uint64(n), root), gs.Signature) {
				t.Fatalf("group of %d: event %d does not verify", n, i)
			}
		}
	}
}

// BenchmarkGroupSign is one commit group's signature on the committer's
// path: with the key (crypto/ed25519.Sign) and with nonces made ahead.
func BenchmarkGroupSign(b *testing.B) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	h := sha256.Sum256([]byte("event"))
	hashes := [][]byte{h[:]}
	b.Run("key", func(b *testing.B) {
		for b.Loop() {
			SignGroup(key, hashes)
		}
	})
	// The path's cost: each signature takes a nonce from a full pool (the
	// pool refilled outside the timer, as it is while a gateway idles).
	b.Run("presigned", func(b *testing.B) {
		p := NewPresigner(key)
		p.refilling.Store(true) // refilled here, not behind the timer's back
		for i := 0; b.Loop(); i++ {
			if i%presignDepth == 0 {
				b.StopTimer()
				for len(p.pool) < presignDepth {
					p.pool <- p.newNonce()
				}
				b.StartTimer()
			}
			p.SignGroup(hashes)
		}
	})
	// Signing without pause: every nonce is made somewhere, so this is the
	// CPU a signature costs when groups come faster than idle time refills.
	b.Run("presigned, continuous", func(b *testing.B) {
		p := NewPresigner(key)
		for b.Loop() {
			p.SignGroup(hashes)
		}
	})
}
