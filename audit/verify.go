// Package audit checks the record offline: every event's hash, its link to
// the previous event on its subject, its writer's signature against the
// gateway keys recorded in the ledger, and that no stream sequence is
// missing. It reads records, not NATS: the same checks run on a live
// ledger and on an export.
package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// Record is one stored event as a stream holds it.
type Record struct {
	Stream  string
	Seq     uint64
	Subject string
	Data    []byte
}

// Failure is one thing wrong, with where it is.
type Failure struct {
	Stream  string `json:"stream"`
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// Report sums up a verification.
type Report struct {
	Events   int            `json:"events"`
	Streams  map[string]int `json:"streams"`
	Subjects int            `json:"subjects"`
	Writers  []string       `json:"writers"`
	// Checkpoints is how many signed checkpoints were checked against the
	// digests recomputed from the events they cover.
	Checkpoints int `json:"checkpoints"`
	// TrustedCheckpoints is how many pinned checkpoints (--trusted-checkpoint)
	// the record was checked against.
	TrustedCheckpoints int `json:"trusted_checkpoints"`
	// Anchored: the gateway keys came from --trusted-keys, not from the
	// record itself (whose root record anyone able to rewrite it can forge).
	Anchored bool      `json:"anchored"`
	Failures []Failure `json:"failures"`
	OK       bool      `json:"ok"`
}

// Verifier checks records in stream order.
type Verifier struct {
	digest   map[string][]byte            // stream → running digest so far
	at       map[string]map[uint64][]byte // stream → seq → running digest (for checkpoints)
	keys     map[string][]ed25519.PublicKey
	lastSeq  map[string]uint64
	last     map[string]link              // stream/subject → previous valid event
	pinned   []Record                     // trusted checkpoints, by their stored record
	seen     map[string]map[uint64][]byte // stream → seq → stored bytes of pinned sequences
	cps      int
	anchored bool
	writers  map[string]bool
	streams  map[string]int
	failures []Failure
	events   int

	// Signatures are checked on all cores while the chain is walked in
	// order: Ed25519 verification is most of the cost.
	mu      sync.Mutex
	sigs    chan sigCheck
	workers sync.WaitGroup
}

type sigCheck struct {
	r    Record
	ev   *pb.Event
	pubs []ed25519.PublicKey
}

// signedBy reports whether one of pubs verifies ev's signature.
func signedBy(ev *pb.Event, pubs []ed25519.PublicKey) bool {
	for _, pub := range pubs {
		if ledger.CheckSignature(ev, pub) == nil {
			return true
		}
	}
	return false
}

// SetAnchored records that the keys were pinned by the verifier's caller.
func (v *Verifier) SetAnchored(a bool) { v.anchored = a }

// Pin adds a trusted checkpoint (a stored checkpoint record saved earlier):
// the record must still hold it at its sequence, byte for byte, and the
// events it covers must still hash to its digest. Call before Add.
func (v *Verifier) Pin(r Record) {
	v.pinned = append(v.pinned, r)
	if v.seen[r.Stream] == nil {
		v.seen[r.Stream] = map[uint64][]byte{}
	}
	v.seen[r.Stream][r.Seq] = nil
}

type link struct {
	seq   uint64
	hash  []byte
	event *pb.Event // on execution subjects, for the transition check
}

// NewVerifier checks signatures against keys (gateway id → its enrolled
// public keys).
func NewVerifier(keys map[string][]ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: keys, lastSeq: map[string]uint64{}, last: map[string]link{}, writers: map[string]bool{}, streams: map[string]int{},
		digest: map[string][]byte{}, at: map[string]map[uint64][]byte{}, sigs: make(chan sigCheck, 1024), seen: map[string]map[uint64][]byte{}}
	for range runtime.GOMAXPROCS(0) {
		v.workers.Add(1)
		go func() {
			defer v.workers.Done()
			for c := range v.sigs {
				if !signedBy(c.ev, c.pubs) {
					v.fail(c.r, "signature does not verify with gateway %s's enrolled key (re-signed or forged)", c.ev.GetGatewayId())
				}
			}
		}()
	}
	return v
}

func (v *Verifier) fail(r Record, format string, args ...any) {
	v.mu.Lock()
	v.failures = append(v.failures, Failure{Stream: r.Stream, Seq: r.Seq, Subject: r.Subject, Reason: fmt.Sprintf(format, args...)})
	v.mu.Unlock()
}

// Add checks one record; records of a stream must come in sequence order.
func (v *Verifier) Add(r Record) {
	v.events++
	v.streams[r.Stream]++
	if prev, ok := v.lastSeq[r.Stream]; (ok && r.Seq != prev+1) || (!ok && r.Seq != 1) {
		v.fail(r, "events missing or out of order: after sequence %d comes %d", prev, r.Seq)
	}
	v.lastSeq[r.Stream] = r.Seq
	v.digest[r.Stream] = projector.Chain(v.digest[r.Stream], r.Seq, r.Data)
	if v.at[r.Stream] == nil {
		v.at[r.Stream] = map[uint64][]byte{}
	}
	v.at[r.Stream][r.Seq] = v.digest[r.Stream]
	if pins, ok := v.seen[r.Stream]; ok {
		if _, pinned := pins[r.Seq]; pinned {
			pins[r.Seq] = r.Data
		}
	}
	ev := new(pb.Event)
	if err := proto.Unmarshal(r.Data, ev); err != nil {
		v.fail(r, "undecodable event: %v", err)
		return
	}
	if ev.GetSubject() != r.Subject {
		v.fail(r, "the event names subject %s", ev.GetSubject())
		return
	}
	if err := ledger.CheckHash(ev); err != nil {
		v.fail(r, "hash mismatch: the event's content changed after it was written")
		return
	}
	id := ev.GetGatewayId()
	pubs, ok := v.keys[id]
	switch {
	case !ok || len(pubs) == 0:
		v.fail(r, "writer %q is not an enrolled gateway (forged, or re-signed with another key)", id)
		return
	case len(ev.GetSignature()) == 0:
		v.fail(r, "unsigned event")
		return
	}
	key := r.Stream + "/" + r.Subject
	prev := v.last[key]
	if string(ev.GetPrevHash()) != string(prev.hash) {
		if prev.seq == 0 {
			v.fail(r, "chain broken: the first event seen on the subject links to an earlier one")
		} else {
			v.fail(r, "chain broken: prev_hash does not match the event at sequence %d (an event was removed, reordered or rewritten)", prev.seq)
		}
		return
	}
	var x *pb.Event
	if isExecutionEvent(r) {
		if err := ledger.CheckFollows(prev.event, ev); err != nil { // the hash was checked above
			v.fail(r, "illegal transition: %v", err)
			return
		}
		x = ev
	}
	v.last[key] = link{seq: r.Seq, hash: ev.GetHash(), event: x}
	switch {
	case ev.GetCheckpoint() != nil:
		if !signedBy(ev, pubs) {
			v.fail(r, "signature does not verify with gateway %s's enrolled key (re-signed or forged)", id)
			return
		}
		v.writers[id] = true
		v.checkpoint(r, ev.GetCheckpoint())
	default:
		v.writers[id] = true
		v.sigs <- sigCheck{r: r, ev: ev, pubs: pubs}
	}
}

// checkpoint compares a signed checkpoint with the digest recomputed from
// the events it covers. Checkpoints must come after the streams they seal.
func (v *Verifier) checkpoint(r Record, cp *pb.Checkpoint) {
	last := v.lastSeq[cp.GetStream()]
	switch want, ok := v.at[cp.GetStream()][cp.GetLastSeq()]; {
	case cp.GetLastSeq() > last:
		v.fail(r, "%s truncated: a checkpoint covers sequence %d, the stream ends at %d", cp.GetStream(), cp.GetLastSeq(), last)
	case !ok || string(want) != string(cp.GetRunningDigest()):
		v.fail(r, "checkpoint of %s at sequence %d does not match the events up to it (events rewritten, removed or reordered, or a forged checkpoint)", cp.GetStream(), cp.GetLastSeq())
	default:
		v.cps++
	}
}

// checkPinned compares the record with every trusted checkpoint.
func (v *Verifier) checkPinned() {
	for _, p := range v.pinned {
		got := v.seen[p.Stream][p.Seq]
		switch {
		case got == nil:
			v.fail(p, "rollback or truncation: the trusted checkpoint at %s sequence %d is not in the record (the stream ends at %d)", p.Stream, p.Seq, v.lastSeq[p.Stream])
			continue
		case string(got) != string(p.Data):
			v.fail(p, "rewritten: %s sequence %d differs from the trusted checkpoint saved there", p.Stream, p.Seq)
			continue
		}
		ev := new(pb.Event)
		if proto.Unmarshal(p.Data, ev) != nil || ev.GetCheckpoint() == nil {
			v.fail(p, "the trusted checkpoint is not a checkpoint event")
			continue
		}
		cp := ev.GetCheckpoint()
		if want, ok := v.at[cp.GetStream()][cp.GetLastSeq()]; !ok || string(want) != string(cp.GetRunningDigest()) {
			v.fail(p, "rollback or rewrite: %s no longer hashes to the trusted checkpoint at its sequence %d", cp.GetStream(), cp.GetLastSeq())
		}
	}
}

// Report returns the summary and every failure, in stream order. Add must
// not be called after it.
func (v *Verifier) Report() Report {
	if v.sigs != nil {
		close(v.sigs)
		v.workers.Wait()
		v.sigs = nil
		v.checkPinned()
	}
	sort.SliceStable(v.failures, func(i, j int) bool {
		a, b := v.failures[i], v.failures[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		return a.Seq < b.Seq
	})
	w := make([]string, 0, len(v.writers))
	for id := range v.writers {
		w = append(w, id)
	}
	sort.Strings(w)
	subjects := map[string]bool{}
	for k := range v.last {
		subjects[k] = true
	}
	f := v.failures
	if f == nil {
		f = []Failure{}
	}
	return Report{Events: v.events, Streams: v.streams, Subjects: len(subjects), Writers: w, Checkpoints: v.cps,
		TrustedCheckpoints: len(v.pinned), Anchored: v.anchored, Failures: f, OK: len(f) == 0}
}

// ErrFailed is returned by commands when a verification found failures.
var ErrFailed = errors.New("audit verify: failures (see report)")

// isExecutionEvent reports whether r is on an execution subject in the
// stream of that subject's lane (PORTCULLIS_EXECUTIONS, or
// PORTCULLIS_EXECUTIONS_<k> for lane k of a sharded ledger).
func isExecutionEvent(r Record) bool {
	lane, _, _, ok := ledger.SplitExecutionSubject(r.Subject)
	if !ok {
		return false
	}
	k, ok := ledger.StreamLane(r.Stream)
	return ok && k == lane
}
