package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"sync"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/proto"
)

// Seal links ev to the previous event on its subject and sets its own hash:
// SHA-256 over the deterministic encoding of the envelope with hash and
// signature cleared.
func Seal(ev *pb.Event, prevHash []byte) {
	ev.PrevHash = prevHash
	ev.Hash = nil
	ev.Signature = nil
	ev.Hash = eventHash(ev)
}

// CheckHash verifies that ev's hash matches its content.
func CheckHash(ev *pb.Event) error {
	want := ev.GetHash()
	sig := ev.GetSignature()
	ev.Hash, ev.Signature = nil, nil
	got := eventHash(ev)
	ev.Hash, ev.Signature = want, sig
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w: event %s on %s: hash mismatch", ErrCorrupt, ev.GetEventId(), ev.GetSubject())
	}
	return nil
}

func eventHash(ev *pb.Event) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("marshal event for hashing: %v", err)) // only fails on invalid UTF-8, which Validate rejects first
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// Sign signs a sealed event's hash with the writing gateway's key; the
// ledger records each gateway's public key when it starts, so a verifier
// can tell who wrote every event and that nobody else re-signed it.
func Sign(ev *pb.Event, key ed25519.PrivateKey) {
	if key != nil {
		ev.Signature = ed25519.Sign(key, ev.GetHash())
		own.remember(ev.GetHash(), ev.Signature, key.Public().(ed25519.PublicKey))
	}
}

// ownSignaturesMax bounds how many signatures this process remembers.
const ownSignaturesMax = 1 << 16

// ownSignatures remembers the signatures this process made, so checking
// an event it signed itself (the common case: a gateway folds its own
// writes) costs a map lookup instead of an Ed25519 verify. The verdict is
// the one a verify would give: the same signature bytes, by an enrolled
// key, over the same hash.
type ownSignatures struct {
	mu sync.Mutex
	m  map[string]ownSignature
}

type ownSignature struct {
	sig []byte
	pub ed25519.PublicKey
}

var own = &ownSignatures{m: make(map[string]ownSignature)}

func (o *ownSignatures) remember(hash, sig []byte, pub ed25519.PublicKey) {
	o.mu.Lock()
	if len(o.m) >= ownSignaturesMax {
		clear(o.m) // simplest bound; a miss costs one verify
	}
	o.m[string(hash)] = ownSignature{sig: sig, pub: pub}
	o.mu.Unlock()
}

func (o *ownSignatures) made(ev *pb.Event, pubs []ed25519.PublicKey) bool {
	o.mu.Lock()
	s, ok := o.m[string(ev.GetHash())]
	o.mu.Unlock()
	if !ok || !bytes.Equal(s.sig, ev.GetSignature()) {
		return false
	}
	for _, p := range pubs {
		if bytes.Equal(p, s.pub) {
			return true
		}
	}
	return false
}

// ForgetOwnSignatures empties the memory of this process's signatures
// (benchmarks measure the verify every foreign event costs).
func ForgetOwnSignatures() {
	own.mu.Lock()
	clear(own.m)
	own.mu.Unlock()
}

// CheckSignature verifies ev's signature with its writer's public key.
func CheckSignature(ev *pb.Event, pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, ev.GetHash(), ev.GetSignature()) {
		return fmt.Errorf("%w: event %s on %s: signature does not verify with gateway %s's key", ErrCorrupt, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
	}
	return nil
}

// Keys answers which public keys a gateway id is enrolled with (none: not
// enrolled). trust.Keyring implements it from the root-signed enrollment
// records of the meta stream.
// An error means the keys could not be read now (the meta stream was not
// reachable): the caller retries, it never quarantines on it.
type Keys interface {
	GatewayKeys(gatewayID string) ([]ed25519.PublicKey, error)
}

// CheckSigned asserts that a stored event is what an enrolled gateway
// wrote: its hash matches its content and its signature verifies with one
// of its writer's enrolled keys. Nil keys check the hash only (offline
// tools that have no keyring). An event that fails is quarantined, never
// folded or served.
func CheckSigned(ev *pb.Event, keys Keys) error {
	if err := CheckHash(ev); err != nil {
		return err
	}
	if keys == nil {
		return nil
	}
	pubs, err := keys.GatewayKeys(ev.GetGatewayId())
	if err != nil {
		return fmt.Errorf("%w: gateway %s: %v", ErrKeysUnavailable, ev.GetGatewayId(), err)
	}
	if len(pubs) == 0 {
		return fmt.Errorf("%w: event %s on %s: writer %q is not an enrolled gateway", ErrUnenrolled, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
	}
	if own.made(ev, pubs) {
		return nil
	}
	for _, pub := range pubs {
		if len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, ev.GetHash(), ev.GetSignature()) {
			return nil
		}
	}
	return fmt.Errorf("%w: event %s on %s: signature does not verify with gateway %s's enrolled key", ErrCorrupt, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
}
