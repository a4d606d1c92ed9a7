package keeper

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// What travels between gateways outside the ledger is authenticated: a
// forwarded command and its answer carry a MAC under the forward key, which
// every gateway of a ledger derives from the ledger's fingerprint key (the
// ledger makes every gateway use the same one, and hands it only to
// enrolled gateways, sealed to their keys); a lease record is signed with
// the enrolled key of the gateway it names. The NATS subjects these travel
// on are open to every client holding the gateway user's credentials, so
// without them such a client could make a leading gateway decide (and sign)
// commands no caller asked for, answer a forward with a decision that was
// never made, or lead an account. (A MAC, not a signature, on the forwards:
// two of them per forwarded command, at a cost of a microsecond each,
// where two Ed25519 signatures and verifications cost a hot account a
// third of its rate.)

// forwardSkewMax bounds how far a forward's time may be from the
// receiver's clock. A replay inside it is harmless: every command is
// idempotent on its operation key.
const forwardSkewMax = 30 * time.Second

// errUnsigned is a lease record no enrolled gateway signed.
var errUnsigned = errors.New("not signed by an enrolled gateway")

// errNoMAC is a forward or an answer without a valid MAC: not from a
// gateway of this ledger.
var errNoMAC = errors.New("no valid MAC under the ledger's forward key")

// ForwardKey derives the key that authenticates forwards and their answers
// from the ledger's fingerprint key.
func ForwardKey(fingerprintKey []byte) []byte {
	m := hmac.New(sha256.New, fingerprintKey)
	m.Write([]byte(labelForwardKey))
	return m.Sum(nil)
}

// sealed is a forwarded command or its answer on the wire.
type sealed struct {
	From string          `json:"from"`          // the sending gateway's id
	To   string          `json:"to"`            // the gateway it is for
	At   int64           `json:"at"`            // when it was sent, Unix nanoseconds
	Body json.RawMessage `json:"body"`          // a Command, or a reply
	For  string          `json:"for,omitempty"` // an answer: hex SHA-256 of the forward it answers
	MAC  []byte          `json:"mac"`           // HMAC-SHA256 of digest() under the forward key
}

// Labels keep a MAC or a signature over one kind of record from being
// taken for another's (or for an event's).
const (
	labelForward = "portcullis budget forward v1"
	labelAnswer  = "portcullis budget answer v1"
	labelLease   = "portcullis budget lease v1"

	labelForwardKey = "portcullis budget forward key v1"
)

// digest is what a sealed message's MAC covers.
func (s *sealed) digest() []byte {
	label := labelForward
	if s.For != "" {
		label = labelAnswer
	}
	body := sha256.Sum256(s.Body)
	return digestOf(label, s.From, s.To, s.For, string(body[:]), s.At)
}

// digestOf hashes the label and its parts: strings length-prefixed,
// integers as 8 bytes.
func digestOf(label string, parts ...any) []byte {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put(label)
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			put(v)
		case int64:
			binary.BigEndian.PutUint64(n[:], uint64(v))
			h.Write(n[:])
		default:
			panic(fmt.Sprintf("digestOf: %T", p))
		}
	}
	return h.Sum(nil)
}

// seal authenticates body from this gateway to another; answering is the
// hex SHA-256 of the forward it answers ("" for a forward). With no
// forward key (a keeper outside a gateway) it goes out without a MAC.
func (k *Keeper) seal(to string, body []byte, answering string) []byte {
	s := sealed{From: k.gatewayID, To: to, At: k.now().UnixNano(), Body: body, For: answering}
	if key := k.forwardKeyOf(); key != nil {
		s.MAC = macOf(key, s.digest())
	}
	out, _ := json.Marshal(&s) // plain struct: never fails
	return out
}

func macOf(key, digest []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(digest)
	return m.Sum(nil)
}

func (k *Keeper) forwardKeyOf() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.forwardKey
}

// open checks a sealed message addressed to this gateway: from the
// gateway from ("" for any), answering the forward whose hash is
// answering ("" for a forward), with a valid MAC, sent within
// forwardSkewMax of now. Without a forward key (a keeper outside a
// gateway) the MAC is not checked.
func (k *Keeper) open(data []byte, from, answering string) (*sealed, error) {
	var s sealed
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("sealed message: %w", err)
	}
	switch {
	case s.To != k.gatewayID:
		return nil, fmt.Errorf("sealed message for gateway %q, this is %q", s.To, k.gatewayID)
	case from != "" && s.From != from:
		return nil, fmt.Errorf("answer from gateway %q, the forward went to %q", s.From, from)
	case s.For != answering:
		return nil, errors.New("answer to another forward")
	}
	if skew := k.now().Sub(time.Unix(0, s.At)); skew > forwardSkewMax || skew < -forwardSkewMax {
		return nil, fmt.Errorf("sealed message sent %v from this gateway's clock (at most %v)", skew.Round(time.Millisecond), forwardSkewMax)
	}
	if key := k.forwardKeyOf(); key != nil && !hmac.Equal(s.MAC, macOf(key, s.digest())) {
		return nil, fmt.Errorf("sealed message from gateway %q: %w", s.From, errNoMAC)
	}
	return &s, nil
}

// verify checks sig over digest with gateway's enrolled keys (no keys set:
// nothing is checked).
func (k *Keeper) verify(gateway string, digest, sig []byte) error {
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	if keys == nil {
		return nil
	}
	if gateway == "" || len(sig) != ed25519.SignatureSize {
		return errUnsigned
	}
	pubs, err := keys.GatewayKeys(gateway)
	if err != nil {
		return fmt.Errorf("enrolled keys: %w", err)
	}
	for _, pub := range pubs {
		if ed25519.Verify(pub, digest, sig) {
			return nil
		}
	}
	return errUnsigned
}

// hashOf is the hex SHA-256 of a forward, which its answer names.
func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// leaseDigest is what a lease record's signature covers.
func leaseDigest(account string, l Lease) []byte {
	return digestOf(labelLease, account, l.Gateway, l.Expires.UnixNano())
}

// signLease signs this gateway's lease on account.
func (k *Keeper) signLease(account string, l Lease) Lease {
	if k.SignKey != nil {
		l.Sig = ed25519.Sign(k.SignKey, leaseDigest(account, l))
	}
	return l
}

// leaseValid reports whether the lease record was written by the gateway
// it names (a forged record routes nothing: it counts as free).
func (k *Keeper) leaseValid(account string, l Lease) bool {
	if l.Gateway == "" {
		return false
	}
	return k.verify(l.Gateway, leaseDigest(account, l), l.Sig) == nil
}
