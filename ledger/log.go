package ledger

import (
	"context"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Message is one event to append on a subject under a compare-and-set
// condition: it lands only if the subject's last stream sequence is still
// ExpectedSeq (0: the subject has no event yet).
type Message struct {
	Subject     string
	ExpectedSeq uint64
	Event       *pb.Event
}

// Head is the latest event on a subject and its stream sequence.
type Head struct {
	Seq   uint64
	Event *pb.Event
}

// Log is the append-only source of truth (DESIGN.md §4: JetStream streams).
type Log interface {
	// Append appends one decision: every message lands or none does. It
	// returns each message's stream sequence. A failed condition is an
	// ErrConflict; an answer that never came is ErrAppendUnknown. Success is
	// reported only for messages that landed.
	Append(ctx context.Context, msgs ...Message) ([]uint64, error)
	// Last reads the subject's latest event from the log itself (not a
	// view). ErrNotFound when the subject is empty.
	Last(ctx context.Context, subject string) (Head, error)
}

// Views are the rebuildable read models the projector keeps. They may lag
// the log; the ledger treats them as hints and the log decides.
type Views interface {
	// Head is the latest event the views have folded for subject.
	Head(ctx context.Context, subject string) (Head, error)
	// ListExecutions pages through executions, newest first.
	ListExecutions(ctx context.Context, q ListQuery) ([]*pb.Execution, string, error)
}

// ListQuery selects a page of executions.
type ListQuery struct {
	PageSize  int
	PageToken string // execution id to continue after
	State     pb.State
	Tool      string
}

// Subjects of the executions stream. One subject per intent (the matching
// decision) and one per execution (its transitions and attaches), so an
// analyst can replay one execution with a single subject filter.
const (
	ExecutionsStream    = "PORTCULLIS_EXECUTIONS"
	intentSubjectPrefix = "pc.intent."
	execSubjectPrefix   = "pc.exec."
)

// ExecutionsSubjects are the subjects the executions stream captures.
var ExecutionsSubjects = []string{intentSubjectPrefix + "*", execSubjectPrefix + "*"}

// ExecutionSubject is the subject that owns an execution's transitions.
func ExecutionSubject(executionID string) string { return execSubjectPrefix + executionID }

// IntentSubject is the subject that owns the matching decision for a key token.
func IntentSubject(token string) string { return intentSubjectPrefix + token }

// IsExecutionSubject reports whether subject is an execution's subject.
func IsExecutionSubject(subject string) bool {
	return len(subject) > len(execSubjectPrefix) && subject[:len(execSubjectPrefix)] == execSubjectPrefix
}
