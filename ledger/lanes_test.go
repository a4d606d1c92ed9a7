package ledger

import (
	"context"
	"errors"
	"testing"
)

const laneTestID = "act_01M8RC0WVC1SVYYKBZ5A5NRX1Z"

// One lane is today's ledger: the same stream, subjects and filters.
func TestOneLaneIsTheExecutionsStream(t *testing.T) {
	for _, n := range []Lanes{0, 1} {
		if got := n.ExecutionSubject("fabc", laneTestID); got != ExecutionSubject("fabc", laneTestID) || got != "pc.exec.fabc."+laneTestID {
			t.Fatalf("lanes %d: subject %s", n, got)
		}
		if got := n.IntentFilter("fabc"); got != "pc.exec.fabc.*" {
			t.Fatalf("lanes %d: filter %s", n, got)
		}
		if s := n.Streams(); len(s) != 1 || s[0] != ExecutionsStream {
			t.Fatalf("lanes %d: streams %v", n, s)
		}
	}
	if LaneSubjects(0)[0] != ExecutionsSubjects[0] {
		t.Fatalf("lane 0 subjects %v", LaneSubjects(0))
	}
}

// The lane of an intent is a stable hash: a ledger's existing intents must
// map to the same lane forever (changing the hash would split intents).
func TestLaneOfIsStable(t *testing.T) {
	n := Lanes(4)
	golden := map[string]int{"fabc": 3, "k0123": 2, "f" + "00": 1, "kdeadbeef": 2}
	for tok, want := range golden {
		if got := n.Of(tok, ""); got != want {
			t.Errorf("lane of %s: %d, want %d (the hash changed: existing ledgers would be split)", tok, got, want)
		}
	}
	if n.Of(ReadOnlyToken, laneTestID) != n.Of(laneTestID, "") {
		t.Fatal("read-only executions are not spread by execution id")
	}
	for _, tok := range []string{"fabc", "k0123"} {
		k := n.Of(tok, "")
		subj := n.ExecutionSubject(tok, laneTestID)
		lane, token, id, ok := SplitExecutionSubject(subj)
		if !ok || lane != k || token != tok || id != laneTestID || !n.Owns(subj) {
			t.Fatalf("%s: lane %d token %s id %s ok %v owns %v", subj, lane, token, id, ok, n.Owns(subj))
		}
		if other := LanePrefix((k+1)%4) + tok + "." + laneTestID; n.Owns(other) {
			t.Fatalf("%s is owned in the wrong lane", other)
		}
		if f := n.IntentFilter(tok); f != LanePrefix(k)+tok+".*" {
			t.Fatalf("filter %s", f)
		}
	}
}

func TestLaneNames(t *testing.T) {
	for k, want := range map[int]string{0: "pc.exec.", 1: "pc.exec1.", 12: "pc.exec12."} {
		if LanePrefix(k) != want {
			t.Fatalf("prefix %d: %s", k, LanePrefix(k))
		}
		if got, ok := StreamLane(LaneStream(k)); !ok || got != k {
			t.Fatalf("stream lane of %s: %d %v", LaneStream(k), got, ok)
		}
	}
	for _, bad := range []string{"PORTCULLIS_EXECUTIONS_0", "PORTCULLIS_EXECUTIONS_01", "PORTCULLIS_EXECUTIONS_x", "PORTCULLIS_BUDGET"} {
		if _, ok := StreamLane(bad); ok {
			t.Fatalf("%s taken for a lane", bad)
		}
	}
	for _, bad := range []string{"pc.exec0.f.x", "pc.exec01.f.x", "pc.execx.f.x", "pc.execute.f.x", "pc.budget.a"} {
		if _, _, ok := SubjectLane(bad); ok {
			t.Fatalf("%s taken for a lane subject", bad)
		}
	}
}

type recordLog struct{ appended int }

func (r *recordLog) Append(_ context.Context, msgs ...Message) ([]uint64, error) {
	r.appended += len(msgs)
	return make([]uint64, len(msgs)), nil
}
func (r *recordLog) Last(context.Context, string) (Head, error) { return Head{}, ErrNotFound }
func (r *recordLog) LastSeq(context.Context) (uint64, error)    { return 0, nil }

// A decision goes to its lane's log, and never spans lanes.
func TestLaneLogRoutes(t *testing.T) {
	logs := []*recordLog{{}, {}}
	l := laneLog{{Log: logs[0]}, {Log: logs[1]}}
	ctx := context.Background()
	if _, err := l.Append(ctx, Message{Subject: "pc.exec1.f.x"}, Message{Subject: "pc.exec1.f.y"}); err != nil || logs[1].appended != 2 || logs[0].appended != 0 {
		t.Fatalf("lane 1 append: %v %d %d", err, logs[0].appended, logs[1].appended)
	}
	if _, err := l.Append(ctx, Message{Subject: "pc.exec.f.x"}, Message{Subject: "pc.exec1.f.y"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a decision spanning lanes: %v", err)
	}
	if _, err := l.Last(ctx, "pc.exec2.f.x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a lane the ledger does not have: %v", err)
	}
}
