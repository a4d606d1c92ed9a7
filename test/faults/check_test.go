package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

const (
	readWaitMax  = 60 * time.Second
	sweepWaitMax = 90 * time.Second // every orphan's deadline (1 s + grace) and a few sweeps
	maxHistories = 10               // findings printed with their intent's history
)

// problem is one checker finding.
type problem struct {
	at    time.Time
	lost  bool // else duplicated
	opKey string
	what  string
}

type results struct {
	problems                                 []problem
	executions, events, sends, keys, orphans int
	audit, replicas, linear, views           string
	replicaLost                              int // messages missing on a corrupted replica
}

// execEvents are one execution's events in stream order.
type execEvents struct {
	opKey  string
	events []*pb.Event
}

func (e *execEvents) count(types ...pb.EventType) int {
	n := 0
	for _, ev := range e.events {
		for _, ty := range types {
			if ev.GetType() == ty {
				n++
			}
		}
	}
	return n
}

// results counts the events that record the target's answer: RESULT_OBSERVED,
// and a RESOLVED_COMPLETED carrying a status after an OUTCOME_UNKNOWN, which
// RecordResult appends for an answer reported after the dispatch deadline's
// sweep recorded the outcome unknown (the campaign's clients never call
// Resolve).
func (e *execEvents) results() int {
	n, unknown := 0, false
	for _, ev := range e.events {
		switch ev.GetType() {
		case pb.EventType_EVENT_TYPE_RESULT_OBSERVED:
			n++
		case pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN:
			unknown = true
		case pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED:
			if unknown && ev.GetExecutionChanged().GetExecution().GetTargetStatus() != 0 {
				n++
			}
		}
	}
	return n
}

// types lists the events' types in stream order, for a finding.
func (e *execEvents) types() string {
	if e == nil {
		return "no events"
	}
	out := make([]string, len(e.events))
	for i, ev := range e.events {
		out[i] = strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")
	}
	return strings.Join(out, " ")
}

// dispatches counts the dispatches: DISPATCHED events and an
// ACCEPTED_DISPATCHED (accepted and dispatched in one event).
func (e *execEvents) dispatches() int {
	return e.count(pb.EventType_EVENT_TYPE_DISPATCHED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED)
}

// readLedger reads every event of the executions streams (every shard).
func readLedger(t testing.TB, c *cluster) (map[string]*execEvents, int) {
	t.Helper()
	nc := c.connect(t, natsauth.Analyst)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*execEvents{}
	n := 0
	for _, name := range laneStreams(t, js) {
		n += readLane(t, js, name, out)
	}
	return out, n
}

// laneStreams names the ledger's execution streams (PORTCULLIS_EXECUTIONS
// and, on a sharded ledger, PORTCULLIS_EXECUTIONS_<k>).
func laneStreams(t testing.TB, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readWaitMax)
	defer cancel()
	for {
		var names []string
		l := js.StreamNames(ctx)
		for name := range l.Name() {
			if _, ok := ledger.StreamLane(name); ok {
				names = append(names, name)
			}
		}
		if l.Err() == nil && len(names) > 0 {
			sort.Strings(names)
			return names
		}
		if ctx.Err() != nil {
			t.Fatalf("list the executions streams: %v", l.Err())
		}
		time.Sleep(200 * time.Millisecond) // a leader being elected
	}
}

// readLane adds every event of one execution stream to out.
func readLane(t testing.TB, js jetstream.JetStream, name string, out map[string]*execEvents) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readWaitMax)
	defer cancel()
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	var err error
	for {
		if s, err = js.Stream(ctx, name); err == nil {
			if info, err = s.Info(ctx); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond) // a leader being elected
	}
	if info.State.LastSeq == 0 {
		return 0
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for seq := uint64(0); seq < info.State.LastSeq; {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, _ := m.Metadata()
			seq = md.Sequence.Stream
			ev := new(pb.Event)
			if err := proto.Unmarshal(m.Data(), ev); err != nil {
				t.Fatalf("%s event %d: %v", name, seq, err)
			}
			n++
			ch := ev.GetExecutionChanged()
			if ch == nil || ev.GetExecutionId() == "" {
				continue
			}
			e := out[ev.GetExecutionId()]
			if e == nil {
				e = &execEvents{}
				out[ev.GetExecutionId()] = e
			}
			if k := ch.GetExecution().GetOperationKey(); k != "" {
				e.opKey = k
			}
			e.events = append(e.events, ev)
		}
		if got == 0 && ctx.Err() != nil {
			t.Fatalf("read %s: stuck at %d of %d", name, seq, info.State.LastSeq)
		}
	}
	return n
}

// orphans are executions whose last DISPATCHED has no result or
// OUTCOME_UNKNOWN after it.
func unresolved(ex map[string]*execEvents) []string {
	var out []string
	for _, id := range sortedKeys(ex) {
		open := false
		for _, ev := range ex[id].events {
			switch ev.GetType() {
			case pb.EventType_EVENT_TYPE_DISPATCHED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED:
				open = true
			case pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN,
				pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, pb.EventType_EVENT_TYPE_RESOLVED_NOT_EXECUTED:
				open = false
			}
		}
		if open {
			out = append(out, id)
		}
	}
	return out
}

func check(t *testing.T, seed uint64, c *cluster, pcBin string, l *load, faults []*fault) *results {
	r := &results{}
	fail := func(at time.Time, lost bool, opKey, format string, a ...any) {
		what := fmt.Sprintf(format, a...)
		r.problems = append(r.problems, problem{at: at, lost: lost, opKey: opKey, what: what})
		if len(r.problems) > maxHistories {
			t.Errorf("seed %d: %s", seed, what)
			return
		}
		t.Errorf("seed %d: %s\n  history of %s:\n%s", seed, what, opKey, l.hist.of(opKey))
	}
	// The sweep: wait (bounded) until every dispatch without a result is
	// OUTCOME_UNKNOWN.
	var ex map[string]*execEvents
	deadline := time.Now().Add(sweepWaitMax)
	for {
		ex, r.events = readLedger(t, c)
		open := unresolved(ex)
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, id := range open {
				fail(time.Now(), true, ex[id].opKey, "orphaned dispatch %s never became OUTCOME_UNKNOWN (%v after the campaign)", id, sweepWaitMax)
			}
			break
		}
		time.Sleep(time.Second) // the sweep runs every 2 s
	}
	r.executions = len(ex)

	// Every acknowledged operation is in the stream.
	attaches := map[string]int{}
	for _, a := range l.acks.snapshot() {
		e := ex[a.execID]
		var missing bool
		switch a.kind {
		case ackBegin:
			missing = e == nil || e.count(pb.EventType_EVENT_TYPE_ACCEPTED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED) != 1
		case ackAttach:
			attaches[a.execID]++
			missing = e == nil
		case ackDispatched:
			missing = e == nil || e.dispatches() == 0
		case ackResult:
			missing = e == nil || e.results() == 0
		case ackMCP:
			missing = e == nil
		}
		if missing {
			fail(a.at, true, a.opKey, "acknowledged %v of %s is not in the stream (its events: %s)", a.kind, a.execID, e.types())
		}
	}
	for id, n := range attaches {
		if e := ex[id]; e != nil && e.count(pb.EventType_EVENT_TYPE_ATTACHED) < n {
			fail(time.Now(), true, e.opKey, "%d acknowledged attaches to %s, %d ATTACHED events", n, id, e.count(pb.EventType_EVENT_TYPE_ATTACHED))
		}
	}

	// No intent (operation key) has two executions.
	byKey := map[string][]string{}
	for _, id := range sortedKeys(ex) {
		if k := ex[id].opKey; k != "" {
			byKey[k] = append(byKey[k], id)
		}
	}
	for _, k := range sortedKeys(byKey) {
		if ids := byKey[k]; len(ids) > 1 {
			fail(evTime(ex[ids[1]].events[0].GetTimeUnixNano()), false, k, "intent %s has %d executions: %v", k, len(ids), ids)
		}
	}

	// Per-intent decisions are linearizable (porcupine).
	ledgerIDs := map[string]string{}
	for k, ids := range byKey {
		ledgerIDs[k] = ids[0]
	}
	bad, checked := linearizable(&l.decisions, ledgerIDs, l.hist.start)
	for _, k := range bad {
		fail(time.Now(), false, k, "the decisions on intent %s are not linearizable", k)
	}
	r.linear = fmt.Sprintf("%d intents, %d not linearizable", checked, len(bad))

	// No execution dispatched twice (a resend is legal only after
	// OUTCOME_UNKNOWN); every orphan became OUTCOME_UNKNOWN exactly once.
	for _, id := range sortedKeys(ex) {
		e := ex[id]
		dispatched, unknownSince := 0, false
		for _, ev := range e.events {
			switch ev.GetType() {
			case pb.EventType_EVENT_TYPE_DISPATCHED, pb.EventType_EVENT_TYPE_ACCEPTED_DISPATCHED:
				if dispatched > 0 && !unknownSince {
					fail(evTime(ev.GetTimeUnixNano()), false, e.opKey, "execution %s has a second DISPATCHED without OUTCOME_UNKNOWN before it", id)
				}
				dispatched++
				unknownSince = false
			case pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN:
				if unknownSince {
					fail(evTime(ev.GetTimeUnixNano()), false, e.opKey, "execution %s became OUTCOME_UNKNOWN twice for one dispatch", id)
				}
				unknownSince = true
				r.orphans++
			}
		}
	}

	// The target: every effect belongs to an execution the ledger knows and
	// dispatched; at most one execution's effect per intent; no more
	// requests per key than the ledger's dispatches.
	l.tg.mu.Lock()
	keysOfOp := map[string][]string{}
	for _, key := range sortedKeys(l.tg.sends) {
		n := l.tg.sends[key]
		r.sends += n
		r.keys++
		op := l.tg.op[key]
		keysOfOp[op] = append(keysOfOp[op], key)
		e := ex[key]
		if e == nil {
			fail(time.Now(), false, op, "the target performed %s, an execution the ledger does not know", key)
			continue
		}
		if d := e.dispatches(); n > d {
			fail(time.Now(), false, op, "the target saw %d requests for %s, the ledger %d DISPATCHED", n, key, d)
		}
	}
	l.tg.mu.Unlock()
	for _, op := range sortedKeys(keysOfOp) {
		if ks := keysOfOp[op]; len(ks) > 1 {
			fail(time.Now(), false, op, "the target performed %d effects for intent %s: %v", len(ks), op, ks)
		}
	}

	// Every gateway's live views equal the stream.
	r.views = checkViews(t, seed, l.gws, ex)

	// Every node holds the same copy.
	r.replicas = checkReplicas(t, seed, c, r)

	// audit verify is clean.
	out, err := runCmd(pcBin, "audit", "verify", "--nats-url", c.urls(), "--nats-creds", c.creds(natsauth.Analyst))
	r.audit = "clean"
	if err != nil {
		r.audit = "FAILED"
		t.Errorf("seed %d: portcullis audit verify: %v\n%s", seed, err, lastLines(out, 30))
	}
	return r
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func evTime(unixNano int64) time.Time { return time.Unix(0, unixNano) }

// replicaStates is each node's own copy of the executions stream (its
// /jsz), so a replica that kept a corrupted or truncated store shows.
func replicaStates(c *cluster) ([]copyState, error) {
	var out []copyState
	for i := range nodes {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?acc=LEDGER&streams=true", c.monitor[i]))
		if err != nil {
			return nil, err
		}
		var info natsserver.JSInfo
		err = json.NewDecoder(res.Body).Decode(&info)
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("n%d /jsz: %w", i, err)
		}
		var st copyState
		var shards []string
		for _, a := range info.AccountDetails {
			for _, s := range a.Streams {
				if s.Name == ledger.ExecutionsStream {
					st = copyState{Msgs: s.State.Msgs, Bytes: s.State.Bytes, FirstSeq: s.State.FirstSeq, LastSeq: s.State.LastSeq, Deleted: s.State.NumDeleted}
				} else if _, ok := ledger.StreamLane(s.Name); ok {
					shards = append(shards, fmt.Sprintf("%s: %s", s.Name, stateString(copyState{Msgs: s.State.Msgs, Bytes: s.State.Bytes, FirstSeq: s.State.FirstSeq, LastSeq: s.State.LastSeq, Deleted: s.State.NumDeleted})))
				}
			}
		}
		sort.Strings(shards)
		st.Shards = strings.Join(shards, "; ")
		out = append(out, st)
	}
	return out, nil
}

// copyState is what /jsz says of one node's copy of a stream.
type copyState struct {
	Msgs, Bytes, FirstSeq, LastSeq uint64
	Deleted                        int
	Shards                         string // the other execution shards' states (a sharded ledger)
}

func stateString(s copyState) string {
	out := fmt.Sprintf("%d msgs, seq %d..%d (%d deleted), %d bytes", s.Msgs, s.FirstSeq, s.LastSeq, s.Deleted, s.Bytes)
	if s.Shards != "" {
		out += "; " + s.Shards
	}
	return out
}

// checkReplicas waits (bounded) until the three copies agree. A copy that
// still differs is an error, unless the campaign corrupted that node's
// store: then it is a finding about nats-server (it did not repair the
// replica), counted in r.replicaLost and reported, failing only with
// -strict-replicas.
func checkReplicas(t *testing.T, seed uint64, c *cluster, r *results) string {
	deadline := time.Now().Add(readWaitMax)
	for {
		st, err := replicaStates(c)
		if err == nil && st[0] == st[1] && st[1] == st[2] {
			return "yes (" + stateString(st[0]) + ")"
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Errorf("seed %d: replica states: %v", seed, err)
				return "UNKNOWN"
			}
			most := 0
			for i := range st {
				if st[i].Msgs > st[most].Msgs {
					most = i
				}
			}
			var says []string
			for i := range st {
				if st[i] == st[most] {
					continue
				}
				d := fmt.Sprintf("n%d holds %s, n%d %s", i, stateString(st[i]), most, stateString(st[most]))
				says = append(says, d)
				if !c.corrupted[i] || *strictReplicas {
					t.Errorf("seed %d: the replicas of %s disagree %v after the campaign: %s", seed, ledger.ExecutionsStream, readWaitMax, d)
					continue
				}
				r.replicaLost += int(st[most].Msgs) - int(st[i].Msgs)
				t.Logf("FINDING (seed %d): n%d, whose store the campaign corrupted, kept a different copy of %s: %s; nats-server did not repair it",
					seed, i, ledger.ExecutionsStream, d)
			}
			return "NO: " + strings.Join(says, "; ")
		}
		time.Sleep(500 * time.Millisecond) // a follower catching up
	}
}

// viewsOf lists every execution in a gateway's live views: id → state.
func viewsOf(g *gateway) (map[string]pb.State, error) {
	out := map[string]pb.State{}
	c := g.connect()
	token := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callWaitMax)
		res, err := c.ListExecutions(ctx, connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1000, PageToken: token}))
		cancel()
		if err != nil {
			return nil, err
		}
		for _, e := range res.Msg.GetExecutions() {
			out[e.GetExecutionId()] = e.GetState()
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// checkViews waits (bounded) until every gateway's live views hold every
// execution of the stream in the state of its last event, and reports the
// differences left.
func checkViews(t *testing.T, seed uint64, gws []*gateway, ex map[string]*execEvents) string {
	want := map[string]pb.State{}
	for id, e := range ex {
		want[id] = e.events[len(e.events)-1].GetExecutionChanged().GetExecution().GetState()
	}
	deadline := time.Now().Add(readWaitMax)
	for {
		var diffs []string
		for _, g := range gws {
			got, err := viewsOf(g)
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: %v", g.name, err))
				continue
			}
			n := 0
			for _, id := range sortedKeys(want) {
				if got[id] != want[id] {
					if n++; n <= 3 {
						diffs = append(diffs, fmt.Sprintf("%s: %s is %v, the stream says %v", g.name, id, got[id], want[id]))
					}
				}
			}
			if len(got) != len(want) {
				diffs = append(diffs, fmt.Sprintf("%s: %d executions in the views, %d in the stream", g.name, len(got), len(want)))
			}
		}
		if len(diffs) == 0 {
			return fmt.Sprintf("%d gateways × %d executions equal", len(gws), len(want))
		}
		if time.Now().After(deadline) {
			t.Errorf("seed %d: the live views differ from the stream %v after the campaign:\n  %s", seed, readWaitMax, strings.Join(diffs, "\n  "))
			return "DIFFER"
		}
		time.Sleep(500 * time.Millisecond) // views catching up
	}
}

// TestResultsCountsLateAnswers: an acknowledged RecordResult is in the stream
// as RESULT_OBSERVED, or as the RESOLVED_COMPLETED with the answer's status
// that RecordResult appends after an OUTCOME_UNKNOWN; nothing else counts.
func TestResultsCountsLateAnswers(t *testing.T) {
	ev := func(ty pb.EventType, status int32) *pb.Event {
		return &pb.Event{Type: ty, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{TargetStatus: status}}}}
	}
	accepted := ev(pb.EventType_EVENT_TYPE_ACCEPTED, 0)
	dispatched := ev(pb.EventType_EVENT_TYPE_DISPATCHED, 0)
	unknown := ev(pb.EventType_EVENT_TYPE_OUTCOME_UNKNOWN, 0)
	for _, c := range []struct {
		name   string
		events []*pb.Event
		want   int
	}{
		{"observed", []*pb.Event{accepted, dispatched, ev(pb.EventType_EVENT_TYPE_RESULT_OBSERVED, 201)}, 1},
		{"late answer", []*pb.Event{accepted, dispatched, unknown, ev(pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, 201)}, 1},
		{"dispatched only", []*pb.Event{accepted, dispatched}, 0},
		{"unknown only", []*pb.Event{accepted, dispatched, unknown}, 0},
		{"resolved without an answer", []*pb.Event{accepted, dispatched, unknown, ev(pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, 0)}, 0},
		{"resolved not after unknown", []*pb.Event{accepted, dispatched, ev(pb.EventType_EVENT_TYPE_RESOLVED_COMPLETED, 201)}, 0},
	} {
		e := &execEvents{events: c.events}
		if got := e.results(); got != c.want {
			t.Errorf("%s (%s): results %d, want %d", c.name, e.types(), got, c.want)
		}
	}
	if got := (*execEvents)(nil).types(); got != "no events" {
		t.Errorf("types of no execution: %q", got)
	}
}
