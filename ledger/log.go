package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Message is one event to append on a subject under a compare-and-set
// condition: it lands only if the last stream sequence of CheckSubject
// (its own subject when empty; a subject filter such as an intent's
// "pc.exec.<token>.*" otherwise) is still ExpectedSeq (0: no event yet).
//
// Follows marks a message that continues the decision's previous message on
// the same subject: it carries no condition of its own (the first
// message's condition covers the chain), so one decision can append several
// events to one subject atomically.
type Message struct {
	Subject      string
	CheckSubject string
	ExpectedSeq  uint64
	Follows      bool
	Event        *pb.Event
	// Data, when set, is Event's encoding as SealEncoded returned it (the
	// log stores it instead of marshalling Event again). It must be
	// dropped when Event changes after sealing (Sign).
	Data []byte
}

// Head is the latest event on a subject and its stream sequence.
type Head struct {
	Seq   uint64
	Event *pb.Event
}

// IntentHead is what the views know of one intent: the stream sequence of
// its latest event (any execution of it), which a new execution's
// compare-and-set expects, and the head of its latest execution.
type IntentHead struct {
	Seq    uint64
	Latest Head
}

// Log is the append-only source of truth (docs/design.md §4: JetStream streams).
type Log interface {
	// Append appends one decision: every message lands or none does. It
	// returns each message's stream sequence. A failed condition is an
	// ErrConflict (a *ConflictError naming the sequence when known); an
	// answer that never came is ErrAppendUnknown. Success is reported only
	// for messages that landed.
	Append(ctx context.Context, msgs ...Message) ([]uint64, error)
	// Last reads the subject's latest event from the log itself (not a
	// view). ErrNotFound when the subject is empty.
	Last(ctx context.Context, subject string) (Head, error)
	// LastSeq is the stream's last sequence now.
	LastSeq(ctx context.Context) (uint64, error)
}

// Views are the rebuildable read models the projector keeps. They may lag
// the log; the ledger treats them as hints, and after a conflict waits for
// them to reach the sequence the log reported before deciding again.
type Views interface {
	// Head is the latest event the views have folded for subject. The
	// event may be shared with other readers: callers must not change it
	// (a decision clones the execution it moves on).
	Head(ctx context.Context, subject string) (Head, error)
	// Intent is what the views know of an intent (ErrNotFound: nothing);
	// its head's event is shared as Head's is.
	Intent(ctx context.Context, token string) (IntentHead, error)
	// ExecutionSubject finds an execution's subject by its id.
	ExecutionSubject(ctx context.Context, executionID string) (string, error)
	// KeyedByFingerprint finds the subject of the latest execution begun
	// with an operation key whose fingerprint is fp (ErrNotFound: none).
	KeyedByFingerprint(ctx context.Context, fp string) (string, error)
	// ListExecutions pages through executions, newest first.
	ListExecutions(ctx context.Context, q ListQuery) ([]*pb.Execution, string, error)
	// WaitFor blocks until the views hold every event up to seq.
	WaitFor(ctx context.Context, seq uint64) error
	// Overdue lists (at most max) DISPATCHED executions whose dispatch
	// deadline is at or before now, by id.
	Overdue(ctx context.Context, now time.Time, max int) ([]string, error)
}

// ListQuery selects a page of executions.
type ListQuery struct {
	PageSize  int
	PageToken string // execution id to continue after
	State     pb.State
	Tool      string
}

// Subjects of the executions stream: every event of an execution lives on
// pc.exec.<intent token>.<execution id>. One execution replays with that
// subject (or pc.exec.*.<execution id> when only the id is known); one
// intent, every execution it ever had, with pc.exec.<intent token>.*, the
// subject filter that owns the decision to create a new execution.
//
// A ledger may spread its executions over several lanes (streams, each
// with its own committer), fixed when it is created (see Lanes). Lane 0 is
// the stream and subjects above; lane k ≥ 1 is the stream
// PORTCULLIS_EXECUTIONS_<k> on pc.exec<k>.<intent token>.<execution id>.
const (
	ExecutionsStream  = "PORTCULLIS_EXECUTIONS"
	execSubjectPrefix = "pc.exec."
	execLanePrefix    = "pc.exec" // + lane + "." for lanes ≥ 1
	// ReadOnlyToken is the intent token of read_only executions: they are
	// recorded but never matched, so they share one intent nobody checks.
	ReadOnlyToken = "ro"
	// MaxLanes bounds the lanes of a ledger (each is a stream, a committer
	// and a projector).
	MaxLanes = 64
)

// ExecutionsSubjects are the subjects the executions stream (lane 0) captures.
var ExecutionsSubjects = []string{execSubjectPrefix + "*.*"}

// ExecutionSubject is the subject of one execution's events in lane 0 (a
// ledger of one lane).
func ExecutionSubject(token, executionID string) string {
	return execSubjectPrefix + token + "." + executionID
}

// IntentFilter is the subject filter covering every execution of an intent
// in lane 0 (a ledger of one lane).
func IntentFilter(token string) string { return execSubjectPrefix + token + ".*" }

// Lanes is how many execution streams a ledger spreads its executions
// over. An intent's subjects and its executions' subjects live in one lane
// (the intent token's stable hash modulo the count), so every decision has
// one owning subject and an atomic batch stays in one stream. Read-only
// executions, which no decision is conditioned on, are spread by their
// execution id. 0 and 1 both mean one lane: PORTCULLIS_EXECUTIONS alone.
type Lanes int

// Count is the number of lanes (at least 1).
func (n Lanes) Count() int {
	if n < 1 {
		return 1
	}
	return int(n)
}

// Of is the lane of an intent token (of the execution id for read-only
// executions, whose token is shared).
func (n Lanes) Of(token, executionID string) int {
	c := n.Count()
	if c == 1 {
		return 0
	}
	key := token
	if token == ReadOnlyToken {
		key = executionID
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(c))
}

// ExecutionSubject is the subject of one execution's events, in its lane.
func (n Lanes) ExecutionSubject(token, executionID string) string {
	return LanePrefix(n.Of(token, executionID)) + token + "." + executionID
}

// IntentFilter is the subject filter covering every execution of an
// intent, in its lane.
func (n Lanes) IntentFilter(token string) string {
	return LanePrefix(n.Of(token, "")) + token + ".*"
}

// Owns reports whether an event on subject is where the ledger puts it:
// an execution subject of a lane below the count, the lane its token (or,
// read-only, its execution id) hashes to.
func (n Lanes) Owns(subject string) bool {
	lane, token, id, ok := SplitExecutionSubject(subject)
	return ok && lane < n.Count() && lane == n.Of(token, id)
}

// LaneStream is the stream of lane k.
func LaneStream(k int) string {
	if k == 0 {
		return ExecutionsStream
	}
	return ExecutionsStream + "_" + strconv.Itoa(k)
}

// LanePrefix is the subject prefix of lane k ("pc.exec." or "pc.exec<k>.").
func LanePrefix(k int) string {
	if k == 0 {
		return execSubjectPrefix
	}
	return execLanePrefix + strconv.Itoa(k) + "."
}

// LaneSubjects are the subjects lane k's stream captures.
func LaneSubjects(k int) []string { return []string{LanePrefix(k) + "*.*"} }

// Streams are the streams of every lane, lane 0 first.
func (n Lanes) Streams() []string {
	out := make([]string, n.Count())
	for k := range out {
		out[k] = LaneStream(k)
	}
	return out
}

// StreamLane is the lane whose stream is name (false: not an executions
// stream).
func StreamLane(name string) (int, bool) {
	if name == ExecutionsStream {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, ExecutionsStream+"_")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k >= MaxLanes || strconv.Itoa(k) != rest {
		return 0, false
	}
	return k, true
}

// SubjectLane is the lane of any subject under an execution prefix and the
// rest of it after the prefix (valid execution id or not).
func SubjectLane(subject string) (lane int, rest string, ok bool) {
	if rest, ok := strings.CutPrefix(subject, execSubjectPrefix); ok {
		return 0, rest, true
	}
	rest, ok = strings.CutPrefix(subject, execLanePrefix)
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(rest, ".")
	k, err := strconv.Atoi(num)
	if !ok || err != nil || k < 1 || k >= MaxLanes || strconv.Itoa(k) != num {
		return 0, "", false
	}
	return k, rest, true
}

// ParseExecutionSubject splits an execution subject (of any lane) into
// intent token and execution id.
func ParseExecutionSubject(subject string) (token, executionID string, ok bool) {
	_, token, executionID, ok = SplitExecutionSubject(subject)
	return token, executionID, ok
}

// SplitExecutionSubject splits an execution subject into lane, intent
// token and execution id.
func SplitExecutionSubject(subject string) (lane int, token, executionID string, ok bool) {
	lane, rest, found := SubjectLane(subject)
	if !found {
		return 0, "", "", false
	}
	token, executionID, ok = strings.Cut(rest, ".")
	if !ok || token == "" || strings.Contains(executionID, ".") || ValidateExecutionID(executionID) != nil {
		return 0, "", "", false
	}
	return lane, token, executionID, true
}

// Lane is one execution stream as a decider uses it: its log, and how to
// wait until the views hold it up to a sequence.
type Lane struct {
	Log     Log
	WaitFor func(ctx context.Context, seq uint64) error
}

// laneLog routes every call to the lane its subject lives in.
type laneLog []Lane

var errLaneless = errors.New("ledger: a sharded log has no single last sequence; ask a lane")

func (l laneLog) lane(subject string) (Log, error) {
	k, _, ok := SubjectLane(subject)
	if !ok || k >= len(l) {
		return nil, fmt.Errorf("%w: %s is in no lane of this ledger", ErrInvalid, subject)
	}
	return l[k].Log, nil
}

// Append appends one decision to the lane of its first message; every
// message must be in that lane (an atomic batch spans one stream).
func (l laneLog) Append(ctx context.Context, msgs ...Message) ([]uint64, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	k, _, _ := SubjectLane(msgs[0].Subject)
	for _, m := range msgs[1:] {
		if j, _, _ := SubjectLane(m.Subject); j != k {
			return nil, fmt.Errorf("%w: one decision spans lanes %d and %d", ErrInvalid, k, j)
		}
	}
	log, err := l.lane(msgs[0].Subject)
	if err != nil {
		return nil, err
	}
	return log.Append(ctx, msgs...)
}

func (l laneLog) Last(ctx context.Context, subject string) (Head, error) {
	log, err := l.lane(subject)
	if err != nil {
		return Head{}, err
	}
	return log.Last(ctx, subject)
}

func (l laneLog) LastSeq(context.Context) (uint64, error) { return 0, errLaneless }
