package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/server"
	"google.golang.org/protobuf/types/known/structpb"
)

// shardedOptions are the options of a gateway of a ledger in dataDir with
// the given --exec-shards (0: the ledger's).
func shardedOptions(t *testing.T, dataDir string, shards int) server.Options {
	return server.Options{
		DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1",
		FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ExecShards: shards,
		CheckpointEvery: 50 * time.Millisecond,
	}
}

func shardedGateway(t *testing.T, dataDir string, shards int) *server.Gateway {
	t.Helper()
	g, err := server.Start(context.Background(), shardedOptions(t, dataDir, shards))
	if err != nil {
		t.Fatal(err)
	}
	remember(g)
	t.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

// laneOf finds the shard an execution's events are in by asking every
// shard's stream (the id alone does not name it).
func laneOf(t *testing.T, js jetstream.JetStream, lanes ledger.Lanes, id string) (int, string) {
	t.Helper()
	for k, name := range lanes.Streams() {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(ledger.LanePrefix(k)+"*."+id))
		if err != nil {
			t.Fatal(err)
		}
		for subj := range info.State.Subjects {
			return k, subj
		}
	}
	t.Fatalf("execution %s is in no shard", id)
	return 0, ""
}

type timelineLine struct {
	Stream  string          `json:"stream"`
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Time    time.Time       `json:"time"`
	Event   json.RawMessage `json:"event"`
}

func timeline(t *testing.T, g *server.Gateway, dataDir string, extra ...string) []timelineLine {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"events", "timeline", "--nats-url", g.NatsURL, "--data-dir", dataDir}, extra...)...).Output()
	if err != nil {
		t.Fatalf("events timeline %v: %v\n%s", extra, err, out)
	}
	var ls []timelineLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l timelineLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("timeline line %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

// A ledger of 4 execution shards end to end: executions spread over the
// four streams by intent, a second gateway attaches to and finishes
// executions of every shard, audit verify is clean over all of them, the
// timeline replays everything (or one execution) in order of time, a
// forged event in shard 2 is quarantined, and a restart reads the shard
// count from the ledger and refuses a conflicting --exec-shards.
func TestShardedLedgerEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := shardedGateway(t, dir, 4)
	if a.Lanes.Count() != 4 || len(a.LaneProjectors) != 4 {
		t.Fatalf("lanes %d, projectors %d", a.Lanes.Count(), len(a.LaneProjectors))
	}
	b := startGateway(t, a.NatsURL, nil) // no --exec-shards: the ledger's
	if b.Lanes.Count() != 4 {
		t.Fatalf("a joining gateway got %d lanes, want the ledger's 4", b.Lanes.Count())
	}
	ca, cb := client(a), client(b)
	js, err := jetstream.New(natsConnect(t, a, natsauth.Analyst))
	if err != nil {
		t.Fatal(err)
	}
	byLane := map[int]string{}
	argsOf := map[string]*structpb.Struct{}
	for i := 0; len(byLane) < 4 && i < 64; i++ {
		in := args(t, map[string]any{"amount": 100 + i})
		res, err := ca.Begin(ctx, beginReq("create_payment", in, "", "1"))
		if err != nil || res.Msg.GetDecision() != pb.Decision_DECISION_NEW {
			t.Fatalf("Begin %d: %v %v", i, res, err)
		}
		id := res.Msg.GetExecution().GetExecutionId()
		k, subj := laneOf(t, js, a.Lanes, id)
		if want := a.Lanes.ExecutionSubject(res.Msg.GetExecution().GetIntentToken(), id); res.Msg.GetExecution().GetIntentToken() != "" && subj != want {
			t.Fatalf("execution %s on %s, want %s", id, subj, want)
		}
		if !strings.HasPrefix(subj, ledger.LanePrefix(k)) {
			t.Fatalf("subject %s in shard %d", subj, k)
		}
		if _, ok := byLane[k]; !ok {
			byLane[k] = id
			argsOf[id] = in
		}
	}
	if len(byLane) != 4 {
		t.Fatalf("64 intents filled only shards %v", byLane)
	}
	for k, id := range byLane {
		// Attach on the other gateway (it learns the execution from its own
		// views of shard k), dispatch and record there, return the result here.
		res, err := cb.Begin(ctx, beginReq("create_payment", argsOf[id], "", "2"))
		if err != nil || res.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || res.Msg.GetExecution().GetExecutionId() != id {
			t.Fatalf("shard %d: attach on the second gateway: %v %v", k, res, err)
		}
		mustOK(t)(cb.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
		body := fmt.Sprintf(`{"shard":%d}`, k)
		mustOK(t)(cb.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201, ResultBody: body})))
		again, err := ca.Begin(ctx, beginReq("create_payment", argsOf[id], "", "3"))
		if err != nil || again.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT || again.Msg.GetExecution().GetResultBody() != body {
			t.Fatalf("shard %d: retry after the result: %v %v", k, again, err)
		}
	}
	// Both gateways racing new intents: one execution each, the others
	// attach (a lost compare-and-set catches up the intent's shard).
	for round := range 4 {
		in := args(t, map[string]any{"amount": 9000 + round})
		const racers = 8
		var wg sync.WaitGroup
		ids, news, errs := make([]string, racers), make([]bool, racers), make([]error, racers)
		for i := range racers {
			c := ca
			if i%2 == 1 {
				c = cb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Begin(ctx, beginReq("create_payment", in, "", fmt.Sprint(i)))
				if errs[i] = err; err == nil {
					ids[i], news[i] = res.Msg.GetExecution().GetExecutionId(), res.Msg.GetDecision() == pb.Decision_DECISION_NEW
				}
			}()
		}
		wg.Wait()
		n := 0
		for i := range racers {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("race %d: %v %v", round, ids, errs)
			}
			if news[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("race %d: %d new executions of one intent", round, n)
		}
	}
	// Read-only executions (one shared token) spread by execution id.
	roLanes := map[int]bool{}
	for i := range 16 {
		res, err := cb.Begin(ctx, beginReq("get_release", args(t, map[string]any{"release_id": i}), "", "1"))
		if err != nil || res.Msg.GetDecision() != pb.Decision_DECISION_NEW {
			t.Fatalf("read-only Begin: %v %v", res, err)
		}
		k, _ := laneOf(t, js, a.Lanes, res.Msg.GetExecution().GetExecutionId())
		roLanes[k] = true
		if _, err := ca.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: res.Msg.GetExecution().GetExecutionId()})); err != nil {
			t.Fatalf("read-only execution on the other gateway: %v", err)
		}
	}
	if len(roLanes) < 2 {
		t.Fatalf("16 read-only executions in shards %v", roLanes)
	}

	// The secrets scan reads every shard: a secret argument is in none.
	mustOK(t)(ca.Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": "rel-visible-in-shards", "token": "tok-secret-in-no-shard"}), "", "1")))
	scanStored(t, a, "tok-secret-in-no-shard", "rel-visible-in-shards")

	// Everything, in order of time, from every shard.
	var total uint64
	for _, name := range a.Lanes.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		total += streamCount(t, s)
	}
	all := timeline(t, a, dir)
	if uint64(len(all)) != total {
		t.Fatalf("timeline of %d events, the shards hold %d", len(all), total)
	}
	streams := map[string]bool{}
	for i, l := range all {
		streams[l.Stream] = true
		if i > 0 && l.Time.Before(all[i-1].Time) {
			t.Fatalf("timeline out of time order at %d: %v after %v", i, l.Time, all[i-1].Time)
		}
	}
	if len(streams) != 4 {
		t.Fatalf("timeline over streams %v", streams)
	}
	one := timeline(t, a, dir, "--execution", byLane[3])
	_, subj3 := laneOf(t, js, a.Lanes, byLane[3])
	s3, err := js.Stream(ctx, ledger.LaneStream(3))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(subjectEvents(t, s3, subj3)); len(one) != want || want < 4 {
		t.Fatalf("one execution's timeline: %d events, its subject holds %d", len(one), want)
	}
	for _, l := range one {
		if l.Stream != ledger.LaneStream(3) || l.Subject != subj3 {
			t.Fatalf("one execution's timeline holds %+v", l)
		}
	}
	if shard := timeline(t, a, dir, "--shard", "2"); len(shard) == 0 || shard[0].Stream != ledger.LaneStream(2) {
		t.Fatalf("shard 2's timeline: %v", shard)
	}

	// audit verify over every shard, with checkpoints over each.
	waitSealed(t, a, js)
	verify := func() (string, error) {
		out, err := exec.Command(binary, "audit", "verify", "--nats-url", a.NatsURL, "--data-dir", dir).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil || !strings.Contains(out, "verified") {
		t.Fatalf("audit verify of a clean sharded ledger: %v\n%s", err, out)
	}

	// A forged result in shard 2: quarantined by both gateways, never served.
	victim := byLane[2]
	_, subj := laneOf(t, js, a.Lanes, victim)
	s2, err := js.Stream(ctx, ledger.LaneStream(2))
	if err != nil {
		t.Fatal(err)
	}
	evs := subjectEvents(t, s2, subj)
	_, rogue, _ := ed25519.GenerateKey(nil)
	forged := forge(evs[len(evs)-1], pb.EventType_EVENT_TYPE_RESULT_OBSERVED, func(x *pb.Execution) { x.ResultBody = `{"forged":true}` }, "gw-evil", rogue)
	if _, err := attacker(t, a).Publish(ctx, subj, forged); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, a, 1)
	waitQuarantined(t, b, 1)
	q, err := a.Views.ListQuarantined(ctx, "", 0, 10)
	if err != nil || len(q) != 1 || q[0].GetStream() != ledger.LaneStream(2) {
		t.Fatalf("quarantine view: %v %v", q, err)
	}
	// Paging by (stream, seq) walks past one shard into the next.
	if q, err := a.Views.ListQuarantined(ctx, ledger.LaneStream(1), 1<<40, 10); err != nil || len(q) != 1 || q[0].GetStream() != ledger.LaneStream(2) {
		t.Fatalf("quarantine after shard 1: %v %v", q, err)
	}
	if q, err := a.Views.ListQuarantined(ctx, ledger.LaneStream(2), q[0].GetSeq(), 10); err != nil || len(q) != 0 {
		t.Fatalf("quarantine after the last entry: %v %v", q, err)
	}
	got, err := cb.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: victim}))
	if err != nil || strings.Contains(got.Msg.GetExecution().GetResultBody(), "forged") {
		t.Fatalf("after the forged event: %v %v", got, err)
	}
	if out, err := verify(); err == nil || !strings.Contains(out, ledger.LaneStream(2)) {
		t.Fatalf("audit verify does not name the forged event in shard 2: %v\n%s", err, out)
	}

	// Restart: the shard count comes from the ledger; a conflicting flag is refused.
	b.Close(ctx)
	a.Close(ctx)
	if _, err := server.Start(ctx, shardedOptions(t, dir, 2)); err == nil || !strings.Contains(err.Error(), "created with 4") {
		t.Fatalf("--exec-shards 2 on a ledger of 4: %v", err)
	}
	r := shardedGateway(t, dir, 0)
	if r.Lanes.Count() != 4 {
		t.Fatalf("restarted with %d lanes", r.Lanes.Count())
	}
	id := byLane[1]
	again, err := client(r).Begin(ctx, beginReq("create_payment", argsOf[id], "", "4"))
	if err != nil || again.Msg.GetExecution().GetExecutionId() != id || again.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT {
		t.Fatalf("after the restart: %v %v", again, err)
	}
	honestDecision(t, r, "after-restart")

	// rebuild and replay fold every shard.
	rjs, err := jetstream.New(natsConnect(t, r, natsauth.Analyst))
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := map[string]uint64{}
	for _, name := range r.Lanes.Streams() {
		lastSeq[name] = must(must(rjs.Stream(ctx, name)).Info(ctx)).State.LastSeq
	}
	r.Close(ctx)
	o := shardedOptions(t, dir, 0)
	if err := server.Rebuild(ctx, o, nil); err != nil {
		t.Fatalf("rebuild of a sharded ledger: %v", err)
	}
	views, err := pebbleviews.Open(filepath.Join(dir, "views"))
	if err != nil {
		t.Fatal(err)
	}
	for name, last := range lastSeq {
		if cp, err := views.Checkpoint(name); err != nil || cp != last {
			t.Fatalf("rebuilt views hold %s up to %d, the stream to %d (%v)", name, cp, last, err)
		}
	}
	views.Close()
	replayed, err := server.Replay(ctx, o, "", filepath.Join(t.TempDir(), "replay"), nil)
	if err != nil || replayed < total {
		t.Fatalf("replay of a sharded ledger: %d events (the shards held %d before), %v", replayed, total, err)
	}
	rb := shardedGateway(t, dir, 0)
	again, err = client(rb).Begin(ctx, beginReq("create_payment", argsOf[byLane[3]], "", "5"))
	if err != nil || again.Msg.GetExecution().GetExecutionId() != byLane[3] || again.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT {
		t.Fatalf("after the rebuild: %v %v", again, err)
	}
}

// waitSealed waits until a checkpoint covers every shard's last sequence.
func waitSealed(t *testing.T, g *server.Gateway, js jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	aud, err := js.Stream(ctx, server.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, name := range g.Lanes.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		last := must(s.Info(ctx)).State.LastSeq
		for {
			m, err := aud.GetLastMsgForSubject(ctx, server.CheckpointSubject(name))
			if err == nil {
				if ev, derr := ljs.Decode(m.Data); derr == nil && ev.GetCheckpoint().GetLastSeq() >= last {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no checkpoint of %s up to %d", name, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
