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
	Failures []Failure      `json:"failures"`
	OK       bool           `json:"ok"`
}

// Verifier checks records in stream order.
type Verifier struct {
	digest   map[string][]byte            // stream → running digest so far
	at       map[string]map[uint64][]byte // stream → seq → running digest (for checkpoints)
	keys     map[string]ed25519.PublicKey
	lastSeq  map[string]uint64
	last     map[string]link // stream/subject → previous event
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
	r   Record
	ev  *pb.Event
	pub ed25519.PublicKey
}

type link struct {
	seq  uint64
	hash []byte
}

// NewVerifier checks signatures against keys (gateway id → public key).
func NewVerifier(keys map[string]ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: keys, lastSeq: map[string]uint64{}, last: map[string]link{}, writers: map[string]bool{}, streams: map[string]int{},
		digest: map[string][]byte{}, at: map[string]map[uint64][]byte{}, sigs: make(chan sigCheck, 1024)}
	for range runtime.GOMAXPROCS(0) {
		v.workers.Add(1)
		go func() {
			defer v.workers.Done()
			for c := range v.sigs {
				if ledger.CheckSignature(c.ev, c.pub) != nil {
					v.fail(c.r, "signature does not verify with gateway %s's recorded key (re-signed or forged)", c.ev.GetGatewayId())
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
	ev := new(pb.Event)
	if err := proto.Unmarshal(r.Data, ev); err != nil {
		v.fail(r, "undecodable event: %v", err)
		return
	}
	if ev.GetSubject() != r.Subject {
		v.fail(r, "the event names subject %s", ev.GetSubject())
	}
	if err := ledger.CheckHash(ev); err != nil {
		v.fail(r, "hash mismatch: the event's content changed after it was written")
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
	}
	v.last[key] = link{seq: r.Seq, hash: ev.GetHash()}
	id := ev.GetGatewayId()
	pub, ok := v.keys[id]
	switch {
	case !ok:
		v.fail(r, "writer %q is not a recorded gateway", id)
	case len(ev.GetSignature()) == 0:
		v.fail(r, "unsigned event")
	case ev.GetCheckpoint() != nil:
		if ledger.CheckSignature(ev, pub) != nil {
			v.fail(r, "signature does not verify with gateway %s's recorded key (re-signed or forged)", id)
			return
		}
		v.writers[id] = true
		v.checkpoint(r, ev.GetCheckpoint())
	default:
		v.writers[id] = true
		v.sigs <- sigCheck{r: r, ev: ev, pub: pub}
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
	}
}

// Report returns the summary and every failure, in stream order. Add must
// not be called after it.
func (v *Verifier) Report() Report {
	if v.sigs != nil {
		close(v.sigs)
		v.workers.Wait()
		v.sigs = nil
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
	return Report{Events: v.events, Streams: v.streams, Subjects: len(subjects), Writers: w, Failures: f, OK: len(f) == 0}
}

// ErrFailed is returned by commands when a verification found failures.
var ErrFailed = errors.New("audit verify: failures (see report)")
