package fingerprint

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"

	"github.com/portcullis-dev/portcullis/contract"
)

// Digests is what the ledger stores about an action.
type Digests struct {
	// Record is the RFC 8785 canonical JSON of the canonical action record,
	// secrets already replaced by their keyed digests.
	Record []byte
	// Fingerprint is "hmac-sha256:<64 hex>" over Record; it finds a possibly
	// related prior execution when the correlation changed.
	Fingerprint string
	// RequestDigest is "hmac-sha256:<64 hex>" over the canonical record
	// without intent_scope; it detects an operation key reused with a
	// different request.
	RequestDigest string
}

// Domain strings: each digest is keyed by HMAC(Key, domain), so the three
// kinds of digest are independent even over the same bytes.
const (
	domainSecret      = "portcullis secret v1"
	domainFingerprint = "portcullis fingerprint v1"
	domainRequest     = "portcullis request v1"

	digestPrefix = "hmac-sha256:"
)

// Compute normalizes a.Arguments by rules and digests the canonical action
// record. Bad arguments are refused with ErrTooLarge or ErrInvalidArguments,
// bad rules with ErrInvalidRules, non-UTF-8 fields with ErrInvalidAction.
// The same key, rules and action always give the same Digests.
func Compute(key Key, rules contract.FingerprintRules, a Action) (Digests, error) {
	if len(key) != KeySize {
		return Digests{}, fmt.Errorf("fingerprint: key is %d bytes, want %d", len(key), KeySize)
	}
	compiled, err := compileRules(rules)
	if err != nil {
		return Digests{}, err
	}
	if err := a.validate(); err != nil {
		return Digests{}, err
	}
	args, err := decodeArguments(a.Arguments)
	if err != nil {
		return Digests{}, err
	}
	secretKey := subkey(key, domainSecret)
	err = compiled.normalize(args, func(v any) (string, error) {
		c, err := canonicalJSON(v)
		if err != nil {
			return "", err
		}
		return keyedDigest(secretKey, c), nil
	})
	if err != nil {
		return Digests{}, err
	}
	full, request, err := a.records(args)
	if err != nil {
		return Digests{}, err
	}
	return Digests{
		Record:        full,
		Fingerprint:   keyedDigest(subkey(key, domainFingerprint), full),
		RequestDigest: keyedDigest(subkey(key, domainRequest), request),
	}, nil
}

// subkey derives the key for one kind of digest (remembered: a gateway
// has one key, and Compute needs three subkeys on every Begin).
func subkey(key Key, domain string) *macKey {
	id := string(key) + "\x00" + domain
	if k, ok := subkeys.Load(id); ok {
		return k.(*macKey)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	k := newMacKey(m.Sum(nil))
	if subkeyCount.Add(1) <= maxSubkeys {
		subkeys.Store(id, k)
	}
	return k
}

// maxSubkeys bounds the remembered subkeys (three per key).
const maxSubkeys = 3 * 64

var (
	subkeys     sync.Map // key + domain → *macKey
	subkeyCount atomic.Int64
)

// macKey is an HMAC-SHA256 key with its padded key blocks already hashed
// (crypto/hmac keeps them after the first Reset): a digest clones it
// rather than hashing the pads again. The prepared HMAC is only read.
type macKey struct {
	key      []byte
	prepared hash.Hash
}

func newMacKey(k []byte) *macKey {
	m := hmac.New(sha256.New, k)
	m.Reset() // computes and keeps the padded key states
	return &macKey{key: k, prepared: m}
}

func (k *macKey) new() hash.Hash {
	if c, ok := k.prepared.(hash.Cloner); ok {
		if m, err := c.Clone(); err == nil {
			if h, ok := m.(hash.Hash); ok {
				return h
			}
		}
	}
	return hmac.New(sha256.New, k.key)
}

// keyedDigest is "hmac-sha256:<hex>" of msg under k.
func keyedDigest(k *macKey, msg []byte) string {
	m := k.new()
	m.Write(msg)
	var sum [sha256.Size]byte
	return digestPrefix + hex.EncodeToString(m.Sum(sum[:0]))
}
