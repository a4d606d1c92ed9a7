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
	"google.golang.org/protobuf/proto"
)

// lookupWaitMax bounds one look-up of an unknown writer's enrollment.
const lookupWaitMax = 2 * time.Second

// EnrollRecordsMax is how many enrollment records of one gateway id count,
// in the meta stream's order: an enrollment stored after the first
// EnrollRecordsMax records of its id is never trusted. Anyone with the
// gateway NATS credentials may store records under any id, and every one
// a look-up reads costs a direct get and a signature check; without a
// bound, enough junk under one id made each look-up outlast lookupWaitMax,
// and an event of that writer stopped its projector for good (retried,
// never quarantined). A gateway id needs one record per enrolled key and
// address, far fewer than this; `portcullis enroll` refuses an id whose
// first records are all taken.
const EnrollRecordsMax = 1024

// negativeIDsMax bounds how many unknown gateway ids the keyring remembers
// (each one an attacker may name in a junk event); past it they are
// forgotten and read again from where the meta stream starts.
const negativeIDsMax = 4096

// StoredRecord is one enrollment record as the meta stream holds it: its
// sequence (the order that decides which records count) and its bytes.
type StoredRecord struct {
	Seq  uint64
	Data []byte
}

// Lookup reads the enrollment records stored under one gateway id, in
// stream order, after sequence afterSeq, at most limit of them (forged
// ones included: the keyring checks them). Fewer than limit means there
// are no more now. With an error it may still return the records it read
// before it.
type Lookup func(ctx context.Context, gatewayID string, afterSeq uint64, limit int) ([]StoredRecord, error)

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

	// scanned is, per gateway id not (yet) enrolled, how far its records
	// were read: the negative answer is cached by meta stream sequence, so
	// the next look-up reads only records stored since (one direct get
	// when there are none), and an enrollment that lands later is found.
	// Look-ups run one at a time so that the cursor moves in order.
	lookupMu sync.Mutex
	scanned  map[string]scan
}

type scan struct {
	afterSeq uint64 // last sequence read
	read     int    // records read so far (counting toward EnrollRecordsMax)
}

// NewKeyring trusts enrollments signed by root; lookup may be nil.
func NewKeyring(root ed25519.PublicKey, lookup Lookup) *Keyring {
	return &Keyring{root: root, lookup: lookup, byID: map[string][]*pb.Enrollment{}, scanned: map[string]scan{}}
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

// Enrollments returns the enrolled records of a gateway id. An unknown id
// is looked up: the records stored under it since the last look-up, up to
// the first EnrollRecordsMax of the id in all, so one look-up reads at
// most that many and an id whose first records are all junk is answered
// "not enrolled" (quarantined by the caller) without reading anything.
func (k *Keyring) Enrollments(gatewayID string) ([]*pb.Enrollment, error) {
	if es := k.enrolled(gatewayID); len(es) > 0 {
		return es, nil
	}
	if k.lookup == nil || gatewayID == "" {
		return nil, nil
	}
	k.lookupMu.Lock()
	defer k.lookupMu.Unlock()
	if es := k.enrolled(gatewayID); len(es) > 0 {
		return es, nil // found by the look-up this one waited for
	}
	s := k.scanned[gatewayID]
	if s.read >= EnrollRecordsMax {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupWaitMax)
	defer cancel()
	recs, err := k.lookup(ctx, gatewayID, s.afterSeq, EnrollRecordsMax-s.read)
	for _, r := range recs {
		s.afterSeq, s.read = r.Seq, s.read+1
		sr := new(pb.SignedRecord)
		if proto.Unmarshal(r.Data, sr) != nil {
			k.rejected.Add(1)
			continue
		}
		_, _ = k.Add(sr)
	}
	es := k.enrolled(gatewayID)
	if len(es) > 0 {
		delete(k.scanned, gatewayID)
		return es, nil
	}
	if _, ok := k.scanned[gatewayID]; !ok && len(k.scanned) >= negativeIDsMax {
		clear(k.scanned)
	}
	// Kept on an error too: the records read before it are read for good,
	// so a retry after a slow look-up goes on from there.
	k.scanned[gatewayID] = s
	if err != nil {
		return nil, fmt.Errorf("look up enrollments of %s: %w", gatewayID, err)
	}
	return nil, nil
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
