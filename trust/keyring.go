package trust

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// lookupWaitMax bounds one look-up of an unknown writer's enrollment.
const lookupWaitMax = 2 * time.Second

// Lookup reads the stored enrollment records of one gateway id from the
// meta stream (forged ones included: the keyring checks them).
type Lookup func(ctx context.Context, gatewayID string) ([]*pb.SignedRecord, error)

// Keyring holds the enrolled gateways of one ledger: only keys the root
// signed an enrollment for. It answers ledger.Keys for every event a
// gateway folds or reads. A writer it does not know yet is looked up in
// the meta stream (a gateway enrolls before it writes, so its enrollment
// is there by the time its first event is read); records the root did not
// sign are counted as rejected and ignored.
type Keyring struct {
	root   ed25519.PublicKey
	lookup Lookup

	mu       sync.RWMutex
	byID     map[string][]*pb.Enrollment
	rejected atomic.Uint64
}

// NewKeyring trusts enrollments signed by root; lookup may be nil.
func NewKeyring(root ed25519.PublicKey, lookup Lookup) *Keyring {
	return &Keyring{root: root, lookup: lookup, byID: map[string][]*pb.Enrollment{}}
}

// Root is the root public key the keyring trusts.
func (k *Keyring) Root() ed25519.PublicKey { return k.root }

// Rejected counts enrollment records that failed the root's signature.
func (k *Keyring) Rejected() uint64 { return k.rejected.Load() }

// Add checks one stored enrollment and, when the root signed it, trusts
// its key. A forged record returns ErrBadRecord and changes nothing.
func (k *Keyring) Add(sr *pb.SignedRecord) (*pb.Enrollment, error) {
	e, err := OpenEnrollment(k.root, sr)
	if err != nil {
		k.rejected.Add(1)
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, have := range k.byID[e.GetGatewayId()] {
		if bytes.Equal(have.GetPublicKey(), e.GetPublicKey()) {
			return have, nil
		}
	}
	k.byID[e.GetGatewayId()] = append(k.byID[e.GetGatewayId()], e)
	return e, nil
}

// GatewayKeys returns the enrolled public keys of a gateway id (none: not
// enrolled), looking the id up in the meta stream when it is unknown. An
// error means the meta stream could not be read: the caller retries.
func (k *Keyring) GatewayKeys(gatewayID string) ([]ed25519.PublicKey, error) {
	es, err := k.Enrollments(gatewayID)
	return keysOf(es), err
}

// Enrollments returns the enrolled records of a gateway id.
func (k *Keyring) Enrollments(gatewayID string) ([]*pb.Enrollment, error) {
	if es := k.enrolled(gatewayID); len(es) > 0 {
		return es, nil
	}
	if k.lookup == nil || gatewayID == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupWaitMax)
	defer cancel()
	recs, err := k.lookup(ctx, gatewayID)
	if err != nil {
		return nil, fmt.Errorf("look up enrollments of %s: %w", gatewayID, err)
	}
	for _, sr := range recs {
		_, _ = k.Add(sr)
	}
	return k.enrolled(gatewayID), nil
}

// All returns every enrolled gateway's keys (id → keys).
func (k *Keyring) All() map[string][]ed25519.PublicKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make(map[string][]ed25519.PublicKey, len(k.byID))
	for id, es := range k.byID {
		out[id] = keysOf(es)
	}
	return out
}

func (k *Keyring) enrolled(id string) []*pb.Enrollment {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.byID[id]
}

func keysOf(es []*pb.Enrollment) []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, len(es))
	for i, e := range es {
		out[i] = e.GetPublicKey()
	}
	return out
}
