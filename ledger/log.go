package ledger

import (
	"context"
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

// Log is the append-only source of truth (DESIGN.md §4: JetStream streams).
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
	// Head is the latest event the views have folded for subject.
	Head(ctx context.Context, subject string) (Head, error)
	// Intent is what the views know of an intent (ErrNotFound: nothing).
	Intent(ctx context.Context, token string) (IntentHead, error)
	// ExecutionSubject finds an execution's subject by its id.
	ExecutionSubject(ctx context.Context, executionID string) (string, error)
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
const (
	ExecutionsStream  = "PORTCULLIS_EXECUTIONS"
	execSubjectPrefix = "pc.exec."
	// ReadOnlyToken is the intent token of read_only executions: they are
	// recorded but never matched, so they share one intent nobody checks.
	ReadOnlyToken = "ro"
)

// ExecutionsSubjects are the subjects the executions stream captures.
var ExecutionsSubjects = []string{execSubjectPrefix + "*.*"}

// ExecutionSubject is the subject of one execution's events.
func ExecutionSubject(token, executionID string) string {
	return execSubjectPrefix + token + "." + executionID
}

// IntentFilter is the subject filter covering every execution of an intent.
func IntentFilter(token string) string { return execSubjectPrefix + token + ".*" }

// ParseExecutionSubject splits an execution subject into intent token and
// execution id.
func ParseExecutionSubject(subject string) (token, executionID string, ok bool) {
	rest, found := strings.CutPrefix(subject, execSubjectPrefix)
	if !found {
		return "", "", false
	}
	token, executionID, ok = strings.Cut(rest, ".")
	if !ok || token == "" || strings.Contains(executionID, ".") || ValidateExecutionID(executionID) != nil {
		return "", "", false
	}
	return token, executionID, true
}
