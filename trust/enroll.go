package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"golang.org/x/crypto/nacl/box"
	"google.golang.org/protobuf/proto"
)

// Errors of the trust rules.
var (
	// ErrNotEnrolled: the key is not vouched for by the ledger's root.
	ErrNotEnrolled = errors.New("not enrolled")
	// ErrBadRecord: a meta record is undecodable or its signature is wrong.
	ErrBadRecord = errors.New("bad trust record")
	// ErrUndecodable: a stored meta record is not the message it must be
	// (wrapped with ErrBadRecord).
	ErrUndecodable = errors.New("undecodable")
)

// Domain labels keep a root signature over one kind of record from being
// replayed as another.
const (
	labelEnrollment = "portcullis enrollment v1\x00"
	labelRoot       = "portcullis root v1\x00"
)

// NewRoot is the signed public identity of a root key, for the meta stream.
func NewRoot(root ed25519.PrivateKey, now time.Time) *pb.SignedRecord {
	boxPub, _ := BoxKeys(root)
	r := &pb.RootIdentity{PublicKey: root.Public().(ed25519.PublicKey), BoxPublicKey: boxPub[:], CreatedUnixNano: now.UnixNano()}
	return sign(root, labelRoot, r)
}

// NewLedgerRoot is NewRoot for a ledger that spreads its executions over
// lanes execution streams (recorded in the root so that it is fixed).
func NewLedgerRoot(root ed25519.PrivateKey, now time.Time, lanes uint32) *pb.SignedRecord {
	boxPub, _ := BoxKeys(root)
	r := &pb.RootIdentity{PublicKey: root.Public().(ed25519.PublicKey), BoxPublicKey: boxPub[:], CreatedUnixNano: now.UnixNano(), ExecutionLanes: lanes}
	return sign(root, labelRoot, r)
}

// OpenRoot checks a root record's self-signature and returns it.
func OpenRoot(sr *pb.SignedRecord) (*pb.RootIdentity, error) {
	r := new(pb.RootIdentity)
	if err := proto.Unmarshal(sr.GetRecord(), r); err != nil {
		return nil, fmt.Errorf("%w: root record: %v", ErrBadRecord, err)
	}
	if len(r.GetPublicKey()) != ed25519.PublicKeySize || !ed25519.Verify(r.GetPublicKey(), append([]byte(labelRoot), sr.GetRecord()...), sr.GetSignature()) {
		return nil, fmt.Errorf("%w: root record is not signed by its key", ErrBadRecord)
	}
	return r, nil
}

// Enroll signs a gateway's enrollment with the root key.
func Enroll(root ed25519.PrivateKey, e *pb.Enrollment) *pb.SignedRecord {
	return sign(root, labelEnrollment, e)
}

// EnrollSelf is the enrollment a gateway holding the root key signs for itself.
func EnrollSelf(root, gateway ed25519.PrivateKey, gatewayID, listenAddr string, now time.Time) *pb.SignedRecord {
	boxPub, _ := BoxKeys(gateway)
	return Enroll(root, &pb.Enrollment{
		GatewayId: gatewayID, PublicKey: gateway.Public().(ed25519.PublicKey), ListenAddr: listenAddr,
		EnrolledUnixNano: now.UnixNano(), BoxPublicKey: boxPub[:],
	})
}

// OpenEnrollment checks the root's signature over an enrollment and
// returns it; anything else (a record signed by another key, undecodable
// bytes) is ErrBadRecord and must be ignored.
func OpenEnrollment(rootPub ed25519.PublicKey, sr *pb.SignedRecord) (*pb.Enrollment, error) {
	if len(rootPub) != ed25519.PublicKeySize || !ed25519.Verify(rootPub, append([]byte(labelEnrollment), sr.GetRecord()...), sr.GetSignature()) {
		return nil, fmt.Errorf("%w: enrollment is not signed by the ledger's root key", ErrBadRecord)
	}
	e := new(pb.Enrollment)
	if err := proto.Unmarshal(sr.GetRecord(), e); err != nil {
		return nil, fmt.Errorf("%w: enrollment: %v", ErrBadRecord, err)
	}
	if len(e.GetPublicKey()) != ed25519.PublicKeySize || e.GetGatewayId() == "" {
		return nil, fmt.Errorf("%w: enrollment without gateway id or key", ErrBadRecord)
	}
	return e, nil
}

func sign(key ed25519.PrivateKey, label string, m proto.Message) *pb.SignedRecord {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal trust record: %v", err)) // plain bytes and ints: cannot fail
	}
	return &pb.SignedRecord{Record: b, Signature: ed25519.Sign(key, append([]byte(label), b...))}
}

// SealKey seals a secret (the fingerprint key) to one X25519 public key.
func SealKey(secret []byte, recipient []byte) (*pb.SealedKey, error) {
	if len(recipient) != 32 {
		return nil, fmt.Errorf("%w: box key of %d bytes", ErrBadRecord, len(recipient))
	}
	var to [32]byte
	copy(to[:], recipient)
	sealed, err := box.SealAnonymous(nil, secret, &to, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return &pb.SealedKey{RecipientBoxPublicKey: recipient, Sealed: sealed}, nil
}

// OpenKey opens a secret sealed to priv's box key.
func OpenKey(sk *pb.SealedKey, priv ed25519.PrivateKey) ([]byte, error) {
	pub, secret := BoxKeys(priv)
	out, ok := box.OpenAnonymous(nil, sk.GetSealed(), pub, secret)
	if !ok {
		return nil, fmt.Errorf("%w: the sealed key does not open with this key", ErrBadRecord)
	}
	return out, nil
}

// OpenStoredEnrollment checks an enrollment record as the meta stream
// stores it (a marshalled SignedRecord): it must decode and carry the
// root's signature (OpenEnrollment). Anything else is ErrBadRecord: never
// trusted, and quarantined by whoever reads it. The error wraps
// ErrUndecodable when the stored bytes are not a SignedRecord.
func OpenStoredEnrollment(rootPub ed25519.PublicKey, data []byte) (*pb.Enrollment, error) {
	sr := new(pb.SignedRecord)
	if err := proto.Unmarshal(data, sr); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ErrBadRecord, ErrUndecodable, err)
	}
	return OpenEnrollment(rootPub, sr)
}

// ClaimedGatewayID is the gateway id a stored enrollment record names,
// whether or not anyone signed it ("" when it names none): what a
// quarantined record claims.
func ClaimedGatewayID(data []byte) string {
	sr := new(pb.SignedRecord)
	e := new(pb.Enrollment)
	if proto.Unmarshal(data, sr) != nil || proto.Unmarshal(sr.GetRecord(), e) != nil {
		return ""
	}
	return e.GetGatewayId()
}
