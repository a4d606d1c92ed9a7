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
//
// A subject's chain goes on from its last valid event, as the gateways'
// fold does (projector, Log.Last): an event counts only when it decodes,
// names its subject, hashes right, is signed by an enrolled key of its
// writer, links to the previous valid event on its subject and (executions)
// follows it by a legal transition. One that fails is reported once and
// skipped, so the genuine event after a forged one (which links, as its
// writer did, to the last valid event) is not reported too, while an event
// removed or rewritten still breaks the chain of the one after it.
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

	// Records are checked by themselves (decode, hash, writer, signature:
	// Ed25519 verification is most of the cost) on all cores, a batch at a
	// time, and then walked in order, so that the chain continues only from
	// events whose signature is known to verify.
	batch    []checked
	reported bool
}

// verifyBatch is how many records are checked in parallel before the
// batch is walked in order.
const verifyBatch = 1024

// checked is one record with what can be known of it alone.
type checked struct {
	r     Record
	ev    *pb.Event // nil: undecodable
	fault string    // why it does not count whatever precedes it ("": it may)
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
	return &Verifier{keys: keys, lastSeq: map[string]uint64{}, last: map[string]link{}, writers: map[string]bool{}, streams: map[string]int{},
		digest: map[string][]byte{}, at: map[string]map[uint64][]byte{}, seen: map[string]map[uint64][]byte{}}
}

func (v *Verifier) fail(r Record, format string, args ...any) {
	v.failures = append(v.failures, Failure{Stream: r.Stream, Seq: r.Seq, Subject: r.Subject, Reason: fmt.Sprintf(format, args...)})
}

// Add checks one record; records of a stream must come in sequence order.
// Failures are known once Report is called.
func (v *Verifier) Add(r Record) {
	v.batch = append(v.batch, checked{r: r})
	if len(v.batch) >= verifyBatch {
		v.flush()
	}
}

// flush checks the batch's records by themselves on all cores, then walks
// them in order.
func (v *Verifier) flush() {
	b := v.batch
	n := min(runtime.GOMAXPROCS(0), len(b))
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := w; i < len(b); i += n {
				v.inspect(&b[i])
			}
		})
	}
	wg.Wait()
	for i := range b {
		v.walk(&b[i])
		b[i] = checked{}
	}
	v.batch = b[:0]
}

// inspect checks what a record shows by itself: it decodes, names the
// subject it is stored on, hashes right, and is signed by an enrolled key
// of its writer (the checks of ledger.CheckSigned, with every signature
// verified). It reads only the keys, so records are inspected in parallel.
func (v *Verifier) inspect(c *checked) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(c.r.Data, ev); err != nil {
		c.fault = fmt.Sprintf("undecodable event: %v", err)
		return
	}
	c.ev = ev
	if ev.GetSubject() != c.r.Subject {
		c.fault = fmt.Sprintf("the event names subject %s", ev.GetSubject())
		return
	}
	if err := ledger.CheckHash(ev); err != nil {
		c.fault = "hash mismatch: the event's content changed after it was written"
		return
	}
	id := ev.GetGatewayId()
	switch pubs := v.keys[id]; {
	case len(pubs) == 0:
		c.fault = fmt.Sprintf("writer %q is not an enrolled gateway (forged, or re-signed with another key)", id)
	case len(ev.GetSignature()) == 0:
		c.fault = "unsigned event"
	case !signedBy(ev, pubs):
		c.fault = fmt.Sprintf("signature does not verify with gateway %s's enrolled key (re-signed or forged)", id)
	}
}

// walk takes one inspected record in stream order: sequence, running
// digest and pins, then, for an event that counts by itself, its link to
// the subject's last valid event, its transition and (a checkpoint) the
// digest it seals. Only an event that passes all of it becomes the
// subject's last valid event.
func (v *Verifier) walk(c *checked) {
	r := c.r
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
	if c.fault != "" {
		v.fail(r, "%s", c.fault)
		return
	}
	ev := c.ev
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
	v.writers[ev.GetGatewayId()] = true
	if cp := ev.GetCheckpoint(); cp != nil {
		v.checkpoint(r, cp)
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
	if !v.reported {
		v.flush()
		v.checkPinned()
		v.reported = true
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
