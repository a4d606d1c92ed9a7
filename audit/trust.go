package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/projector"
	"github.com/portcullis-dev/portcullis/trust"
	"google.golang.org/protobuf/proto"
)

// Anchor is what a verification trusts: the ledger's root public key
// (whose signed enrollments name the gateway keys) and/or gateway keys
// given directly. Pinned anchors come from the operator (--trusted-keys),
// never from the record being verified.
type Anchor struct {
	Root     ed25519.PublicKey
	Gateways map[string][]ed25519.PublicKey
	Pinned   bool
}

// LoadTrustedKeys reads a --trusted-keys file: one key per line, "root
// HEX" for the ledger's root public key or "GATEWAY_ID HEX" for an
// enrolled gateway key; blank lines and "#" comments are skipped.
func LoadTrustedKeys(path string) (Anchor, error) {
	f, err := os.Open(path)
	if err != nil {
		return Anchor{}, fmt.Errorf("trusted keys: %w", err)
	}
	defer f.Close()
	a := Anchor{Gateways: map[string][]ed25519.PublicKey{}, Pinned: true}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, hexKey, ok := strings.Cut(t, " ")
		if !ok {
			return Anchor{}, fmt.Errorf("%s:%d: want \"root HEX\" or \"GATEWAY_ID HEX\"", path, line)
		}
		k, err := trust.ParsePublicKey(hexKey)
		if err != nil {
			return Anchor{}, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if name == "root" {
			a.Root = k
		} else {
			a.Gateways[name] = append(a.Gateways[name], k)
		}
	}
	if err := sc.Err(); err != nil {
		return Anchor{}, err
	}
	if a.Root == nil && len(a.Gateways) == 0 {
		return Anchor{}, fmt.Errorf("%s: no keys", path)
	}
	return a, nil
}

// LedgerTrust is the trust material a record carries: the root record and
// the stored enrollment records (forged ones included).
type LedgerTrust struct {
	Root        []byte   `json:"root"`        // a stored pb.SignedRecord of a RootIdentity
	Enrollments [][]byte `json:"enrollments"` // stored pb.SignedRecord of Enrollments
	// EnrollmentRecords are the same records where the meta stream holds
	// them (stream, sequence, subject, stored bytes; undecodable ones
	// included), so that verify names a forged one where it is. Exports
	// made before it lack it; then Enrollments is all there is.
	EnrollmentRecords []Record `json:"enrollment_records,omitempty"`
}

// stored is every stored enrollment record: EnrollmentRecords, or, for an
// export without them, Enrollments (no place known).
func (t LedgerTrust) stored() []Record {
	if len(t.EnrollmentRecords) > 0 {
		return t.EnrollmentRecords
	}
	out := make([]Record, len(t.Enrollments))
	for i, b := range t.Enrollments {
		out[i] = Record{Data: b}
	}
	return out
}

// UnpinnedAnchor trusts the record's own root record (self-signed): it
// tells whether the record is consistent, not who wrote it.
func (t LedgerTrust) UnpinnedAnchor() (Anchor, error) {
	sr := new(pb.SignedRecord)
	if err := proto.Unmarshal(t.Root, sr); err != nil || len(t.Root) == 0 {
		return Anchor{}, fmt.Errorf("no ledger root in the record")
	}
	r, err := trust.OpenRoot(sr)
	if err != nil {
		return Anchor{}, err
	}
	return Anchor{Root: r.GetPublicKey()}, nil
}

// Keys resolves the gateway keys a verification counts: the keys of
// every enrollment the anchor's root signed, plus the anchor's own
// gateway keys. Enrollment records the root did not sign are ignored.
func (a Anchor) Keys(t LedgerTrust) map[string][]ed25519.PublicKey {
	out := map[string][]ed25519.PublicKey{}
	for id, ks := range a.Gateways {
		out[id] = append(out[id], ks...)
	}
	if a.Root != nil {
		kr := trust.NewKeyring(a.Root, nil)
		for _, r := range t.stored() {
			sr := new(pb.SignedRecord)
			if proto.Unmarshal(r.Data, sr) == nil {
				_, _ = kr.Add(sr)
			}
		}
		for id, ks := range kr.All() {
			out[id] = append(out[id], ks...)
		}
	}
	return out
}

// trusts reports whether pub is one of the anchor's keys (root or gateway).
func (a Anchor) trusts(pub ed25519.PublicKey, keys map[string][]ed25519.PublicKey) bool {
	if a.Root != nil && bytes.Equal(a.Root, pub) {
		return true
	}
	for _, ks := range keys {
		for _, k := range ks {
			if bytes.Equal(k, pub) {
				return true
			}
		}
	}
	return false
}

// SavedCheckpoints is a --trusted-checkpoint file: the latest signed
// checkpoint of every sealed stream, as stored in the checkpoints stream.
type SavedCheckpoints struct {
	SavedAt     time.Time `json:"saved_at"`
	Checkpoints []Record  `json:"checkpoints"`
}

// LoadCheckpoints reads a --trusted-checkpoint file and checks each saved
// checkpoint's signature against keys.
func LoadCheckpoints(path string, keys map[string][]ed25519.PublicKey) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trusted checkpoint: %w", err)
	}
	var sc SavedCheckpoints
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, fmt.Errorf("trusted checkpoint %s: %w", path, err)
	}
	if len(sc.Checkpoints) == 0 {
		return nil, fmt.Errorf("trusted checkpoint %s: no checkpoints", path)
	}
	for _, r := range sc.Checkpoints {
		ev := new(pb.Event)
		if err := proto.Unmarshal(r.Data, ev); err != nil || ev.GetCheckpoint() == nil {
			return nil, fmt.Errorf("trusted checkpoint %s: seq %d is not a checkpoint", path, r.Seq)
		}
		if !signedBy(ev, keys[ev.GetGatewayId()]) {
			return nil, fmt.Errorf("trusted checkpoint %s: seq %d is not signed by a trusted gateway key", path, r.Seq)
		}
	}
	return sc.Checkpoints, nil
}

// MetaStream is the stream that holds the ledger's trust records.
const MetaStream = "PORTCULLIS_META"

// checkEnrollments names every stored enrollment record the anchor's root
// did not sign (undecodable, forged): the gateways quarantine the same
// ones (projector.CheckEnrollment), and neither ever trusts them. Without
// a root to check against (gateway keys pinned alone) nothing is said.
func (v *Verifier) checkEnrollments(a Anchor, t LedgerTrust) {
	if a.Root == nil {
		return
	}
	for _, r := range t.stored() {
		if err := projector.CheckEnrollment(a.Root, r.Subject, r.Data); err != nil {
			if r.Stream == "" {
				r.Stream = MetaStream
			}
			v.fail(r, "%v", err)
		}
	}
}
