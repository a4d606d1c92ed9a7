package test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/trust"
)

// trustGateway runs a gateway on the embedded default in dataDir.
func trustGateway(t *testing.T, dataDir string) *server.Gateway {
	t.Helper()
	g, err := server.Start(context.Background(), server.Options{
		DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1",
		FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	remember(g)
	t.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

// attacker is a raw NATS client on the ledger's server holding STOLEN
// gateway credentials, the strongest client the NATS boundary lets in: it
// publishes whatever it likes to pc.>, bypassing every gateway. Without
// credentials the server refuses the connection outright.
func attacker(t *testing.T, g *server.Gateway) jetstream.JetStream {
	t.Helper()
	if nc, err := nats.Connect(g.NatsURL, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected to the ledger's NATS")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without credentials: %v, want %v", err, nats.ErrAuthorization)
	}
	nc := natsConnect(t, g, natsauth.Gateway)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// waitQuarantined waits (bounded) until the gateway quarantined n messages.
func waitQuarantined(t *testing.T, g *server.Gateway, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Quarantined() < n {
		if time.Now().After(deadline) {
			t.Fatalf("quarantined %d, want %d", g.Quarantined(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// honestDecision shows an honest gateway still deciding: a new execution
// is accepted and dispatched once.
func honestDecision(t *testing.T, g *server.Gateway, order string) {
	t.Helper()
	ctx := context.Background()
	c := client(g)
	res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": order}), "", "1"))
	if err != nil || res.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("honest Begin after the attack: %v %v", res, err)
	}
	if _, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: res.Msg.GetExecution().GetExecutionId()})); err != nil {
		t.Fatalf("honest MarkDispatched after the attack: %v", err)
	}
}

// forge builds an event that follows head on its subject, signed by key
// and claiming gatewayID.
func forge(head *pb.Event, t pb.EventType, apply func(x *pb.Execution), gatewayID string, key ed25519.PrivateKey) []byte {
	x := proto.Clone(head.GetExecutionChanged().GetExecution()).(*pb.Execution)
	apply(x)
	ev := &pb.Event{EventId: "evt_forged", Type: t, Subject: head.GetSubject(), ExecutionId: head.GetExecutionId(),
		TimeUnixNano: time.Now().UnixNano(), GatewayId: gatewayID,
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x}}}
	ledger.Seal(ev, head.GetHash())
	ledger.Sign(ev, key)
	b, _ := proto.Marshal(ev)
	return b
}

// A forged RESULT_OBSERVED on an execution's subject, signed with an
// unknown key (impersonating the enrolled gateway, and as an unenrolled
// one), is quarantined: a retry still gets the honest state, a read from
// the log serves the latest valid event, the honest result lands with
// compare-and-set on the subject's real last sequence, and the projectors go on.
func TestForgedResultIsQuarantined(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	c := client(g)
	a := args(t, map[string]any{"amount": 4200})
	first, err := c.Begin(ctx, beginReq("create_payment", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	s := ledgerStream(t, g)
	evs := subjectEvents(t, s, "pc.exec.*."+id)
	head := evs[len(evs)-1]

	js := attacker(t, g)
	_, rogue, _ := ed25519.GenerateKey(nil)
	observed := func(x *pb.Execution) {
		x.State = pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED
		x.TargetStatus = 200
		x.ResultBody = `{"charge":"forged"}`
	}
	for _, who := range []string{g.ID, "gw-evil"} {
		if _, err := js.Publish(ctx, head.GetSubject(), forge(head, pb.EventType_EVENT_TYPE_RESULT_OBSERVED, observed, who, rogue)); err != nil {
			t.Fatal(err)
		}
	}
	waitQuarantined(t, g, 2)

	retry, err := c.Begin(ctx, beginReq("create_payment", a, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if retry.Msg.GetRecovery() != pb.Recovery_RECOVERY_WAIT || retry.Msg.GetExecution().GetResultBody() != "" {
		t.Fatalf("retry after a forged result: %v %v %q", retry.Msg.GetRecovery(), retry.Msg.GetExecution().GetState(), retry.Msg.GetExecution().GetResultBody())
	}
	got, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetExecution().GetState() != pb.State_STATE_DISPATCHED {
		t.Fatalf("the log served %v", got.Msg.GetExecution().GetState())
	}
	// Another forged message on top, then the honest result: it lands.
	if _, err := js.Publish(ctx, head.GetSubject(), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, g, 3)
	rec, err := c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201, ResultBody: `{"charge":"ch_1"}`}))
	if err != nil {
		t.Fatalf("honest result after forged ones: %v", err)
	}
	if rec.Msg.GetExecution().GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
		t.Fatalf("honest result: %v", rec.Msg.GetExecution().GetState())
	}
	again, err := c.Begin(ctx, beginReq("create_payment", a, "", "3"))
	if err != nil || again.Msg.GetRecovery() != pb.Recovery_RECOVERY_RETURN_RESULT || again.Msg.GetExecution().GetResultBody() != `{"charge":"ch_1"}` {
		t.Fatalf("retry after the honest result: %v %v", again, err)
	}
	// The quarantine view names each one, over Connect.
	ac := portcullisv1connect.NewAuditServiceClient(http.DefaultClient, "http://"+g.Addr)
	q, err := ac.ListQuarantine(ctx, connect.NewRequest(&pb.ListQuarantineRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	reasons := fmt.Sprint(q.Msg.GetQuarantined())
	if q.Msg.GetTotal() != 3 || !strings.Contains(reasons, "signature does not verify") || !strings.Contains(reasons, "not an enrolled gateway") || !strings.Contains(reasons, "undecodable") {
		t.Fatalf("quarantine view: %d %s", q.Msg.GetTotal(), reasons)
	}
	for _, e := range q.Msg.GetQuarantined() {
		if at := e.GetQuarantinedAt(); at == nil || at.AsTime().UnixNano() != e.GetTimeUnixNano() || time.Since(at.AsTime()) > time.Hour {
			t.Fatalf("quarantined_at %v, time_unix_nano %d", at, e.GetTimeUnixNano())
		}
	}
	// A replayed old event (validly signed, stored again on top) breaks the
	// chain: quarantined, and a read from the log does not serve it.
	// Read at once, as an agent would. (Whether the fold has seen the
	// replay by then is a race this test does not control;
	// TestReadWaitsForTheViewsToCheckTheChain holds the views back to
	// show that the read waits for them.)
	raw := subjectRaw(t, s, head.GetSubject())
	if _, err := js.Publish(ctx, head.GetSubject(), raw[len(raw)-2]); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil || got.Msg.GetExecution().GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
		t.Fatalf("read after a replayed event: %v %v", got, err)
	}
	waitQuarantined(t, g, 4)
	// An investigation reads past the quarantined messages and never takes
	// them as evidence.
	inv, err := ac.Investigate(ctx, connect.NewRequest(&pb.InvestigateRequest{ExecutionId: id}))
	if err != nil {
		t.Fatalf("investigate over quarantined messages: %v", err)
	}
	for _, st := range inv.Msg.GetTimeline() {
		if st.GetGatewayId() == "gw-evil" || strings.Contains(st.GetDetail(), "forged") {
			t.Fatalf("a quarantined message in the timeline: %v", st)
		}
	}
	if n := len(inv.Msg.GetTimeline()); n != 5 { // accepted, dispatched, attached, result, attached
		t.Fatalf("timeline of %d steps: %v", n, inv.Msg.GetTimeline())
	}
	// The metrics count each by its kind.
	fams := scrape(t, g)
	for _, reason := range []string{"signature", "unenrolled", "undecodable", "chain"} {
		if v, _ := sample(t, fams, "portcullis_quarantined_events_total", map[string]string{"stream": "PORTCULLIS_EXECUTIONS", "reason": reason}); v != 1 {
			t.Errorf("quarantined with reason %s: %v, want 1", reason, v)
		}
	}
	out, err := exec.Command(binary, "audit", "quarantine", "--addr", "http://"+g.Addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "4 quarantined") || !strings.Contains(string(out), `(claims "gw-evil")`) {
		t.Fatalf("audit quarantine: %v\n%s", err, out)
	}
	honestDecision(t, g, "after-forged-result")
}

// subjectRaw returns the stored bytes of every valid event on a subject.
func subjectRaw(t *testing.T, s jetstream.Stream, subject string) [][]byte {
	t.Helper()
	var out [][]byte
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	for seq := uint64(1); uint64(len(out)) < n; seq++ {
		m, err := s.GetMsg(context.Background(), seq, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			t.Fatal(err)
		}
		seq = m.Sequence
		ev := new(pb.Event)
		if proto.Unmarshal(m.Data, ev) == nil && ev.GetEventId() != "evt_forged" && len(ev.GetHash()) > 0 {
			out = append(out, m.Data)
		} else {
			n--
		}
	}
	return out
}

// One garbage message on pc.exec.* (and one on a real intent's subject
// filter) is quarantined; the views keep folding later events, a new
// execution of that intent is still created, and a rebuild succeeds.
func TestGarbageMessageDoesNotStopTheLedger(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	c := client(g)
	a := args(t, map[string]any{"order": "g-1"})
	first, err := c.Begin(ctx, beginReq("create_payment", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	x := first.Msg.GetExecution()
	token, _, _ := ledger.ParseExecutionSubject(ledger.ExecutionSubject(x.GetIntentToken(), x.GetExecutionId()))
	for _, step := range []func() error{
		func() error {
			_, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: x.GetExecutionId()}))
			return err
		},
		func() error {
			_, err := c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: x.GetExecutionId(), TargetStatus: 201}))
			return err
		},
		func() error {
			_, err := c.MarkDelivered(ctx, connect.NewRequest(&pb.MarkDeliveredRequest{ExecutionId: x.GetExecutionId()}))
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	js := attacker(t, g)
	for _, subj := range []string{"pc.exec.x.y", "pc.exec." + token + ".junk"} {
		if _, err := js.Publish(ctx, subj, []byte("garbage")); err != nil {
			t.Fatal(err)
		}
	}
	waitQuarantined(t, g, 2)
	// The delivered execution no longer absorbs the action: a new one is
	// created under compare-and-set on the intent's real last sequence.
	next, err := c.Begin(ctx, beginReq("create_payment", a, "", "2"))
	if err != nil || next.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("new execution on an intent with a garbage message: %v %v", next, err)
	}
	honestDecision(t, g, "after-garbage")
	last, err := g.ExecutionsLog.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.Views.WaitFor(wctx, last); err != nil {
		t.Fatalf("views stopped before sequence %d: %v", last, err)
	}
	g.Close(ctx)
	if err := server.Rebuild(ctx, server.Options{DataDir: dataDir, NatsListen: "127.0.0.1:-1"}, nil); err != nil {
		t.Fatalf("rebuild over a garbage message: %v", err)
	}
	v, err := pebbleviews.Open(filepath.Join(dataDir, "views"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.QuarantinedTotal() != 2 {
		t.Fatalf("rebuilt quarantine view holds %d", v.QuarantinedTotal())
	}
}

// A rogue enrollment (a gateway key "signed" by a root the ledger does not
// have) is quarantined and never trusted: the events its key signs are
// quarantined too, audit verify reports both, an unenrolled gateway
// refuses to start, and honest gateways keep deciding.
func TestRogueEnrollmentIsIgnored(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	c := client(g)
	first, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": "r-1"}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	js := attacker(t, g)
	_, rogueRoot, _ := ed25519.GenerateKey(nil)
	_, evil, _ := ed25519.GenerateKey(nil)
	sr := trust.EnrollSelf(rogueRoot, evil, "gw-evil", "http://127.0.0.1:1", time.Now())
	if _, err := js.Publish(ctx, server.EnrollmentSubject(sr, "gw-evil"), must(proto.Marshal(sr))); err != nil {
		t.Fatal(err)
	}
	// A second root record is refused by the stream (first write wins, and
	// gateways pin the root they saw first anyway).
	if _, err := js.Publish(ctx, server.RootSubject, must(proto.Marshal(trust.NewRoot(rogueRoot, time.Now())))); err == nil {
		t.Fatal("a second root record was stored")
	}
	s := ledgerStream(t, g)
	evs := subjectEvents(t, s, "pc.exec.*."+first.Msg.GetExecution().GetExecutionId())
	forged := forge(evs[len(evs)-1], pb.EventType_EVENT_TYPE_DISPATCHED, func(x *pb.Execution) { x.State = pb.State_STATE_DISPATCHED }, "gw-evil", evil)
	if _, err := js.Publish(ctx, evs[0].GetSubject(), forged); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, g, 2) // the rogue enrollment record itself, and the event its key signed
	if g.Keyring.Rejected() == 0 {
		t.Fatal("the rogue enrollment was not looked at")
	}
	got, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: first.Msg.GetExecution().GetExecutionId()}))
	if err != nil || got.Msg.GetExecution().GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("execution after a rogue writer's event: %v %v", got, err)
	}
	// The live audit reports the forged event.
	out, err := exec.Command(binary, "audit", "verify", "--nats-url", g.NatsURL, "--data-dir", dataDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `writer "gw-evil" is not an enrolled gateway`) || !strings.Contains(string(out), "enrollment record on "+server.EnrollmentSubject(sr, "gw-evil")+" not trusted") {
		t.Fatalf("audit verify after a rogue enrollment: %v\n%s", err, out)
	}
	// A gateway whose key nobody enrolled refuses to start, even with
	// (stolen) gateway credentials for NATS.
	_, err = server.Start(ctx, server.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: g.NatsURL, NatsCreds: credsFor(t, g.NatsURL),
		FingerprintKey: testKey, GatewayID: "gw-evil", SigningKey: writeSeed(t, evil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "is not enrolled") {
		t.Fatalf("unenrolled gateway: %v", err)
	}
	honestDecision(t, g, "after-rogue-enrollment")
}

func writeSeed(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(key.Seed())), 0o600); err != nil {
		t.Fatal(err)
	}
	return "file:" + p
}

// trustedKeysFile pins the ledger's root public key.
func trustedKeysFile(t *testing.T, dataDir string) string {
	t.Helper()
	pub := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "root.pub")))))
	p := filepath.Join(t.TempDir(), "trusted-keys")
	if err := os.WriteFile(p, []byte("# the ledger's root\nroot "+pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// exportLedger exports g's ledger in process, as the analyst (the export
// command's NATS user), the manifest signed with signKey.
func exportLedger(t *testing.T, g *server.Gateway, dir string, signKey ed25519.PrivateKey) {
	t.Helper()
	var w *audit.Writer
	o := server.Options{NatsURL: g.NatsURL, NatsCreds: g.CredsFile(natsauth.Analyst)}
	err := server.ReadLedger(context.Background(), o, func(lt audit.LedgerTrust) error {
		var err error
		w, err = audit.NewWriter(dir, lt, signKey)
		return err
	}, func(r audit.Record, at time.Time) error { return w.Add(r, at) })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// An export rewritten wholesale by someone with write access to the
// streams (their own root, enrollment, re-signed events, checkpoints and
// manifest) is consistent in itself, so it verifies against its own
// manifest; against the pinned root key it fails.
func TestResignedExportFailsAgainstTrustedKeys(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	for i := range 3 {
		honestDecision(t, g, fmt.Sprint("resign-", i))
	}
	if err := g.Views.WaitFor(ctx, must(g.ExecutionsLog.LastSeq(ctx))); err != nil {
		t.Fatal(err)
	}
	if err := g.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	root := must(trust.LoadKey(filepath.Join(dataDir, server.RootKeyFile)))
	export := filepath.Join(t.TempDir(), "export")
	exportLedger(t, g, export, root)
	pinned := audit.VerifyOptions{TrustedKeys: trustedKeysFile(t, dataDir)}
	rep, err := audit.ReadExport(export, pinned)
	if err != nil || !rep.OK || !rep.Anchored || rep.Checkpoints == 0 {
		t.Fatalf("honest export against the pinned root: %v %+v", err, rep)
	}

	// The forger's own ledger: root, enrollment of the same gateway id,
	// every stored event re-signed, checkpoints included.
	_, fakeRoot, _ := ed25519.GenerateKey(nil)
	_, fakeGW, _ := ed25519.GenerateKey(nil)
	lt := audit.LedgerTrust{Root: must(proto.Marshal(trust.NewRoot(fakeRoot, time.Now()))),
		Enrollments: [][]byte{must(proto.Marshal(trust.EnrollSelf(fakeRoot, fakeGW, g.ID, "", time.Now())))}}
	forged := filepath.Join(t.TempDir(), "forged")
	w := must(audit.NewWriter(forged, lt, fakeRoot))
	var man audit.Manifest
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(export, "manifest.json"))), &man); err != nil {
		t.Fatal(err)
	}
	digests := map[string]map[uint64][]byte{} // the forger recomputes the checkpoints too
	cpHash := map[string][]byte{}
	for _, name := range server.AuditedStreams {
		se, ok := man.Streams[name]
		if !ok {
			continue
		}
		digests[name] = map[uint64][]byte{}
		var d []byte
		for _, l := range readLines(t, filepath.Join(export, se.File)) {
			ev := new(pb.Event)
			if err := proto.Unmarshal(l.Data, ev); err != nil {
				t.Fatal(err)
			}
			if cp := ev.GetCheckpoint(); cp != nil {
				cp.RunningDigest = digests[cp.GetStream()][cp.GetLastSeq()]
				ledger.Seal(ev, cpHash[l.Subject])
				cpHash[l.Subject] = ev.GetHash()
			}
			ledger.Sign(ev, fakeGW)
			data := must(proto.Marshal(ev))
			d = projector.Chain(d, l.Seq, data)
			digests[name][l.Seq] = d
			if err := w.Add(audit.Record{Stream: name, Seq: l.Seq, Subject: l.Subject, Data: data}, l.Time); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.ReadExport(forged, audit.VerifyOptions{}); err != nil || !rep.OK {
		t.Fatalf("the forged export should be consistent in itself: %v %+v", err, rep.Failures)
	}
	out, err := exec.Command(binary, "audit", "verify", "--from", forged, "--trusted-keys", pinned.TrustedKeys).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not an enrolled gateway") || !strings.Contains(string(out), "manifest is signed by a key that is not trusted") {
		t.Fatalf("re-signed export against the pinned root: %v\n%s", err, out)
	}
	honestDecision(t, g, "after-resign")
}

// A trusted checkpoint saved earlier detects a rollback of the record to
// before it, even when the rolled-back record (checkpoints included) is
// consistent in itself.
func TestRollbackAgainstTrustedCheckpoint(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	seal := func() {
		t.Helper()
		if err := g.Views.WaitFor(ctx, must(g.ExecutionsLog.LastSeq(ctx))); err != nil {
			t.Fatal(err)
		}
		if err := g.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	honestDecision(t, g, "rb-1")
	seal()
	early := filepath.Join(t.TempDir(), "early")
	exportLedger(t, g, early, nil) // what a rollback would restore
	honestDecision(t, g, "rb-2")
	seal()
	cpFile := filepath.Join(t.TempDir(), "checkpoint.json")
	if out, err := exec.Command(binary, "audit", "checkpoint", "--nats-url", g.NatsURL, "--data-dir", dataDir, "--out", cpFile).CombinedOutput(); err != nil {
		t.Fatalf("audit checkpoint: %v\n%s", err, out)
	}
	honestDecision(t, g, "rb-3")
	seal()
	now := filepath.Join(t.TempDir(), "now")
	exportLedger(t, g, now, nil)

	pin := audit.VerifyOptions{TrustedCheckpoint: cpFile}
	rep, err := audit.ReadExport(now, pin)
	if err != nil || !rep.OK || rep.TrustedCheckpoints == 0 {
		t.Fatalf("current record against the trusted checkpoint: %v %+v", err, rep)
	}
	if rep, err := audit.ReadExport(early, audit.VerifyOptions{}); err != nil || !rep.OK {
		t.Fatalf("the rolled-back record is consistent in itself: %v %+v", err, rep.Failures)
	}
	rep, err = audit.ReadExport(early, pin)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(fmt.Sprint(rep.Failures), "rollback or truncation") {
		t.Fatalf("rollback against the trusted checkpoint: %+v", rep.Failures)
	}
	// The live ledger verifies against it too.
	if out, err := exec.Command(binary, "audit", "verify", "--nats-url", g.NatsURL, "--data-dir", dataDir, "--trusted-checkpoint", cpFile,
		"--trusted-keys", trustedKeysFile(t, dataDir)).CombinedOutput(); err != nil || !strings.Contains(string(out), "trusted checkpoints") {
		t.Fatalf("live verify against the trusted checkpoint: %v\n%s", err, out)
	}
	honestDecision(t, g, "after-rollback-check")
}

// An edited decoded event in an export line is caught (the stored bytes
// are what is signed), and verify with no ledger fails.
func TestVerifyChecksDecodedEventsAndNeedsALedger(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	honestDecision(t, g, "decoded")
	if err := g.Views.WaitFor(ctx, must(g.ExecutionsLog.LastSeq(ctx))); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(t.TempDir(), "export")
	exportLedger(t, g, export, nil)
	edited := tampered(t, export, func(ls []audit.Line) []audit.Line {
		ls[0].Event = json.RawMessage(strings.Replace(string(ls[0].Event), "agent-7", "agent-8", 1))
		return ls
	})
	wantFailure(t, edited, 1, "decoded event in the export line differs")

	ns, creds := natstest.StartAuth(t)
	out, err := exec.Command(binary, "audit", "verify", "--nats-url", ns.ClientURL(), "--nats-creds", natsauth.Path(creds, natsauth.Analyst)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no ledger on nats "+ns.ClientURL()) {
		t.Fatalf("verify of an empty server: %v\n%s", err, out)
	}
}

// A gateway nobody enrolled refuses to start and says how to enroll it;
// after `portcullis enroll` it starts, adopts the fingerprint key the
// ledger shares sealed to it (no NATS reader can read the key), and
// retries through either gateway match.
func TestEnrollCommandAndSealedFingerprintKey(t *testing.T) {
	ctx := context.Background()
	d1 := t.TempDir()
	g1 := trustGateway(t, d1)
	d2 := t.TempDir()
	o2 := server.Options{DataDir: d2, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: g1.NatsURL, NatsCreds: credsFor(t, g1.NatsURL),
		GatewayID: "gw-2", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := server.Start(ctx, o2)
	if err == nil || !strings.Contains(err.Error(), "is not enrolled") {
		t.Fatalf("unenrolled gateway: %v", err)
	}
	m := regexp.MustCompile(`--public-key ([0-9a-f]{64}) --box-key ([0-9a-f]{64})`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the refusal does not say how to enroll: %v", err)
	}
	out, err := exec.Command(binary, "enroll", "--nats-url", g1.NatsURL, "--data-dir", d1, "--root-key", "file:"+g1.RootKeyPath,
		"--gateway-id", "gw-2", "--public-key", m[1], "--box-key", m[2], "--addr", "http://127.0.0.1:1").CombinedOutput()
	if err != nil {
		t.Fatalf("enroll: %v\n%s", err, out)
	}
	g2, err := server.Start(ctx, o2)
	if err != nil {
		t.Fatalf("enrolled gateway: %v", err)
	}
	defer g2.Close(ctx)
	if hex.EncodeToString(g2.Key) != testKey {
		t.Fatal("the enrolled gateway did not adopt the ledger's fingerprint key")
	}
	a := args(t, map[string]any{"amount": 9})
	first, err := client(g1).Begin(ctx, beginReq("create_payment", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client(g2).Begin(ctx, beginReq("create_payment", a, "", "2"))
	if err != nil || second.Msg.GetExecution().GetExecutionId() != first.Msg.GetExecution().GetExecutionId() {
		t.Fatalf("retry through the enrolled gateway: %v %v", second, err)
	}
	// Nothing in the meta stream holds the key in the clear.
	js := attacker(t, g1)
	meta := must(js.Stream(ctx, "PORTCULLIS_META"))
	info := must(meta.Info(ctx, jetstream.WithSubjectFilter(">")))
	for subj := range info.State.Subjects {
		msg := must(meta.GetLastMsgForSubject(ctx, subj))
		if strings.Contains(string(msg.Data), testKey) || strings.Contains(string(msg.Data), string(must(hex.DecodeString(testKey)))) {
			t.Fatalf("%s holds the fingerprint key in the clear", subj)
		}
	}
	honestDecision(t, g2, "after-enroll")
}

// The first gateway on a fresh cluster (its streams made by the operator
// as the NATS admin, as `portcullis streams` does), given the operator's
// root key, creates the ledger with that root and keeps no copy of it.
func TestNewLedgerWithTheOperatorsRootKey(t *testing.T) {
	ctx := context.Background()
	ns, creds := natstest.StartAuth(t)
	if _, err := server.EnsureStreams(ctx, server.Options{NatsURL: ns.ClientURL(), NatsCreds: natsauth.Path(creds, natsauth.Admin)}); err != nil {
		t.Fatal(err)
	}
	_, root, _ := ed25519.GenerateKey(nil)
	t.Setenv("PORTCULLIS_TEST_ROOT", hex.EncodeToString(root.Seed()))
	dataDir := t.TempDir()
	g, err := server.Start(ctx, server.Options{DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: ns.ClientURL(),
		NatsCreds: natsauth.Path(creds, natsauth.Gateway), RootKey: "env:PORTCULLIS_TEST_ROOT", FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if _, err := os.Stat(filepath.Join(dataDir, server.RootKeyFile)); err == nil {
		t.Fatal("the gateway wrote a copy of the operator's root key")
	}
	pinned := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "root.pub")))))
	if pinned != hex.EncodeToString(root.Public().(ed25519.PublicKey)) {
		t.Fatalf("pinned root %s", pinned)
	}
	honestDecision(t, g, "operator-root")
}

// A forged session owner record never makes a gateway forward an agent's
// request (and its bearer token) anywhere: only to an enrolled gateway's
// recorded address.
func TestForgedSessionOwnerIsNotForwarded(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	var hits atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer evil.Close()
	js := attacker(t, g)
	for i, claim := range []string{g.ID + " " + evil.URL, "gw-evil " + evil.URL} {
		sid := fmt.Sprintf("forged-session-%d", i)
		sum := sha256.Sum256([]byte(sid))
		if _, err := js.Publish(ctx, "pc.meta.session."+hex.EncodeToString(sum[:16]), []byte(claim)); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the gateway forwarded %d agent requests to a forged owner", n)
	}
}

// A garbage message on a budget account's subject, before the account's
// first decision and after it, is quarantined; the account is still set up
// and decided on (compare-and-set on the subject's real last sequence).
func TestGarbageOnABudgetAccount(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	b := budgetClient(g)
	js := attacker(t, g)
	if _, err := js.Publish(ctx, "pc.budget.fresh", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, g, 1)
	if _, err := b.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "fresh", Limit: 1000, Currency: "GBP"})); err != nil {
		t.Fatalf("first decision on an account with a garbage message: %v", err)
	}
	if _, err := js.Publish(ctx, "pc.budget.fresh", []byte("more garbage")); err != nil {
		t.Fatal(err)
	}
	waitQuarantined(t, g, 2)
	res, err := b.Reserve(ctx, reserve("fresh", "op-1", "sha256:x", 100))
	if err != nil || !res.Msg.GetDecision().GetAllowed() {
		t.Fatalf("reserve after garbage: %v %v", res, err)
	}
	acc, err := b.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: "fresh"}))
	if err != nil || acc.Msg.GetAccount().GetHeld() != 100 {
		t.Fatalf("account after garbage: %v %v", acc, err)
	}
}

// The first answer of an investigation comes from the signed sessions
// journal: the agent's client, version and remote address, not the
// session id the call carried. Only a stateful (2025-11-25) session is
// journaled; a stateless 2026-07-28 call (the Go SDK client's default)
// carries no session, and the investigation says it cannot tell its
// process apart instead of calling it "one agent session".
func TestInvestigationCountsProcessesFromTheJournal(t *testing.T) {
	ctx := context.Background()
	tg := newTarget(t)
	g := startMCPGateway(t, mcpConfig(t, tg), "")
	ac := portcullisv1connect.NewAuditServiceClient(http.DefaultClient, "http://"+g.Addr)
	firstAnswer := func(s *sdk.ClientSession, release string) (string, string) {
		t.Helper()
		defer s.Close()
		r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "create_payment", Arguments: map[string]any{"release_id": release, "n": 1}})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := structured(t, r)["execution_id"].(string)
		if id == "" {
			t.Fatalf("no execution id: %v", structured(t, r))
		}
		inv, err := ac.Investigate(ctx, connect.NewRequest(&pb.InvestigateRequest{ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		q1 := inv.Msg.GetAnswers()[0]
		return q1.GetAnswer(), fmt.Sprint(q1.GetEvidence())
	}

	s, err := mcpLegacySession(g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() == "" {
		t.Fatal("the 2025-11-25 client has no session")
	}
	answer, evidence := firstAnswer(s, "j1")
	if !strings.HasPrefix(answer, "one: ") || !strings.Contains(answer, "signed sessions journal") ||
		!strings.Contains(evidence, "client test-agent 1") || !strings.Contains(evidence, "from 127.0.0.1:") {
		t.Fatalf("first answer (session): %s %s", answer, evidence)
	}

	s, err = mcpSession(t, g, agentToken)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != "" {
		t.Fatalf("the default client opened session %q; this case wants a stateless call", s.ID())
	}
	answer, evidence = firstAnswer(s, "j2")
	if !strings.HasPrefix(answer, "unknown: 1 call(s) carried no session") || strings.Contains(answer, "one agent session") || !strings.Contains(evidence, "no session: ") {
		t.Fatalf("first answer (stateless): %s %s", answer, evidence)
	}
}

// laggingViews are views that have not folded subj's latest messages yet
// (stale) until someone waits for them.
type laggingViews struct {
	ledger.Views
	subj   string
	stale  ledger.Head
	caught atomic.Bool
}

func (v *laggingViews) Head(ctx context.Context, subj string) (ledger.Head, error) {
	if subj == v.subj && !v.caught.Load() {
		return v.stale, nil
	}
	return v.Views.Head(ctx, subj)
}

func (v *laggingViews) WaitFor(ctx context.Context, seq uint64) error {
	err := v.Views.WaitFor(ctx, seq)
	v.caught.Store(true)
	return err
}

// A read from the log never serves a genuine old event replayed at the end
// of its subject, even while the views have not folded (and quarantined)
// it yet: the read waits for them. (It served the replay, whose hash and
// signature pass, for the ~100 ms before the fold.)
func TestReadWaitsForTheViewsToCheckTheChain(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	c := client(g)
	first, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"amount": 4300}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Msg.GetExecution().GetExecutionId()
	mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
	mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201, ResultBody: `{"charge":"ch_2"}`})))
	waitViews(t, g)
	s := ledgerStream(t, g)
	subj := first.Msg.GetExecution().GetExecutionId()
	evs := subjectEvents(t, s, "pc.exec.*."+subj)
	subject := evs[0].GetSubject()
	stale, err := g.Views.Head(ctx, subject)
	if err != nil || stale.Event.GetExecutionChanged().GetExecution().GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
		t.Fatalf("views before the replay: %+v %v", stale, err)
	}
	raw := subjectRaw(t, s, subject)
	if _, err := attacker(t, g).Publish(ctx, subject, raw[1]); err != nil { // DISPATCHED, again
		t.Fatal(err)
	}
	views := &laggingViews{Views: g.Views, subj: subject, stale: stale}
	svc := ledger.NewService(ledger.Config{Log: g.ExecutionsLog, Views: views, Key: g.Key, Contracts: g.Contracts, GatewayID: g.ID, SignKey: g.SignKey})
	x, err := svc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED || x.GetResultBody() != `{"charge":"ch_2"}` {
		t.Fatalf("read while the views lag a replayed event: %v %q", x.GetState(), x.GetResultBody())
	}
}

// staleLog is a log whose reads come from a replica that has not caught up:
// it knows no event of any subject yet.
type staleLog struct{ ledger.Log }

func (staleLog) Last(context.Context, string) (ledger.Head, error) {
	return ledger.Head{}, ledger.ErrNotFound
}

// A read answered by a replica that has not caught up (a direct get on a
// replicated stream) does not make an execution this gateway knows
// "not found": GetExecution answered 404, and an executor's role check
// permission_denied, right after another gateway's Begin on a cluster.
func TestReadFromAStaleReplicaFindsTheExecution(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	c := client(g)
	first, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"amount": 4400}), "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Msg.GetExecution().GetExecutionId()
	waitViews(t, g)
	svc := ledger.NewService(ledger.Config{Log: staleLog{g.ExecutionsLog}, Views: g.Views, Key: g.Key, Contracts: g.Contracts, GatewayID: g.ID, SignKey: g.SignKey})
	x, err := svc.Get(ctx, id)
	if err != nil || x.GetExecutionId() != id || x.GetState() != pb.State_STATE_ACCEPTED {
		t.Fatalf("read through a stale replica: %v %v", x, err)
	}
	if _, err := svc.Get(ctx, "act_01M8MFY3Q2ABCDEFGHJKMNPQRS"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an unknown execution: %v, want not found", err)
	}
}
