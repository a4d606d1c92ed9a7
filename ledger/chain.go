package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"

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
	}
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
	for _, pub := range pubs {
		if len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, ev.GetHash(), ev.GetSignature()) {
			return nil
		}
	}
	return fmt.Errorf("%w: event %s on %s: signature does not verify with gateway %s's enrolled key", ErrCorrupt, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
}
