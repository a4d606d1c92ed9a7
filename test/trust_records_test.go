package test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/trust"
)

// A forged enrollment record, a garbage one, a forged checkpoint and a
// garbage checkpoint, published with stolen gateway NATS credentials, take
// the path of a bad ledger event: rows of the quarantine view (stream,
// sequence, subject, reason), the gateway's count and quarantine metric,
// ListQuarantine, and audit verify names each (and nothing else). None is
// trusted: the gateway's next checkpoint follows the last valid one, and a
// rebuild finds the same four again.
func TestForgedTrustRecordsAreQuarantined(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	c := client(g)
	if _, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": "tr-1"}), "", "1")); err != nil {
		t.Fatal(err)
	}
	waitViews(t, g)
	if err := g.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	js := attacker(t, g)
	audStream, err := js.Stream(ctx, server.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	cpSubject := server.CheckpointSubject(ledger.ExecutionsStream)
	m, err := audStream.GetLastMsgForSubject(ctx, cpSubject)
	if err != nil {
		t.Fatalf("no checkpoint sealed: %v", err)
	}
	head := new(pb.Event)
	if err := proto.Unmarshal(m.Data, head); err != nil {
		t.Fatal(err)
	}

	_, rogue, _ := ed25519.GenerateKey(nil)
	forgedCP := &pb.Event{EventId: "evt_forged", Type: pb.EventType_EVENT_TYPE_CHECKPOINT, Subject: cpSubject, GatewayId: g.ID, TimeUnixNano: time.Now().UnixNano(),
		Body: &pb.Event_Checkpoint{Checkpoint: &pb.Checkpoint{Stream: ledger.ExecutionsStream, LastSeq: 1 << 40, RunningDigest: make([]byte, 32)}}}
	ledger.Seal(forgedCP, head.GetHash())
	ledger.Sign(forgedCP, rogue)
	_, rogueRoot, _ := ed25519.GenerateKey(nil)
	forgedEnroll := trust.EnrollSelf(rogueRoot, rogue, "gw-evil", "http://127.0.0.1:1", time.Now())
	type pub struct {
		subject string
		data    []byte
		stream  string
		kind    string // the metric's reason label
	}
	pubs := []pub{
		{cpSubject, must(proto.Marshal(forgedCP)), server.AuditStream, "signature"},
		{cpSubject, []byte("garbage"), server.AuditStream, "undecodable"},
		{server.EnrollmentSubject(forgedEnroll, "gw-evil"), must(proto.Marshal(forgedEnroll)), "PORTCULLIS_META", "signature"},
		{server.EnrollSubjectPfx + "gw-junk.0011223344556677", []byte("\xffgarbage"), "PORTCULLIS_META", "undecodable"},
	}
	seqs := map[string]uint64{} // subject/stream → seq (the two checkpoints share a subject)
	for i, p := range pubs {
		ack, err := js.Publish(ctx, p.subject, p.data)
		if err != nil {
			t.Fatal(err)
		}
		seqs[fmt.Sprint(i)] = ack.Sequence
	}
	waitQuarantined(t, g, 4)

	// The gateway's next checkpoint follows the last valid one: it is not
	// quarantined, and verify does not name it.
	if _, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": "tr-2"}), "", "1")); err != nil {
		t.Fatal(err)
	}
	waitViews(t, g)
	if err := g.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := audStream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last.State.LastSeq <= seqs["1"] {
		t.Fatalf("no checkpoint after the forged ones (audit stream ends at %d)", last.State.LastSeq)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.Views.StreamWaitFor(wctx, server.AuditStream, last.State.LastSeq); err != nil {
		t.Fatalf("checkpoints not folded: %v", err)
	}
	if n := g.Quarantined(); n != 4 {
		t.Fatalf("quarantined %d, want 4", n)
	}

	// ListQuarantine names each where it is; the metric counts each.
	ac := portcullisv1connect.NewAuditServiceClient(http.DefaultClient, "http://"+g.Addr)
	q, err := ac.ListQuarantine(ctx, connect.NewRequest(&pb.ListQuarantineRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if q.Msg.GetTotal() != 4 || len(q.Msg.GetQuarantined()) != 4 {
		t.Fatalf("quarantine view: %d %v", q.Msg.GetTotal(), q.Msg.GetQuarantined())
	}
	listed := map[string]*pb.Quarantined{}
	for _, r := range q.Msg.GetQuarantined() {
		listed[fmt.Sprintf("%s/%d", r.GetStream(), r.GetSeq())] = r
	}
	for i, p := range pubs {
		r := listed[fmt.Sprintf("%s/%d", p.stream, seqs[fmt.Sprint(i)])]
		if r == nil || r.GetSubject() != p.subject || r.GetReason() == "" {
			t.Fatalf("%s seq %d %s not listed: %v", p.stream, seqs[fmt.Sprint(i)], p.subject, q.Msg.GetQuarantined())
		}
	}
	fams := scrape(t, g)
	for _, p := range pubs {
		if v, _ := sample(t, fams, "portcullis_quarantined_events_total", map[string]string{"stream": p.stream, "reason": p.kind}); v != 1 {
			t.Errorf("quarantined on %s with reason %s: %v, want 1", p.stream, p.kind, v)
		}
	}

	// audit verify names the four, and only them.
	out, err := exec.Command(binary, "audit", "verify", "--json", "--nats-url", g.NatsURL, "--data-dir", dataDir).Output()
	var rep audit.Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err == nil {
		t.Fatalf("audit verify: %v %v\n%s", err, jerr, out)
	}
	if len(rep.Failures) != 4 {
		t.Fatalf("verify failures: %+v", rep.Failures)
	}
	for i, p := range pubs {
		found := false
		for _, f := range rep.Failures {
			found = found || (f.Stream == p.stream && f.Seq == seqs[fmt.Sprint(i)] && f.Subject == p.subject)
		}
		if !found {
			t.Fatalf("verify does not name %s seq %d %s: %+v", p.stream, seqs[fmt.Sprint(i)], p.subject, rep.Failures)
		}
	}
	if rep.Checkpoints < 2 {
		t.Fatalf("verify checked %d checkpoints", rep.Checkpoints)
	}
	honestDecision(t, g, "after-forged-trust-records")

	// A rebuild finds the same four.
	g.Close(ctx)
	if err := server.Rebuild(ctx, server.Options{DataDir: dataDir, NatsListen: "127.0.0.1:-1"}, nil); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	v, err := pebbleviews.Open(filepath.Join(dataDir, "views"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.QuarantinedTotal() != 4 {
		t.Fatalf("rebuilt quarantine view holds %d", v.QuarantinedTotal())
	}
}

// waitViews waits (bounded) until g's views hold every execution event.
func waitViews(t *testing.T, g *server.Gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := g.ExecutionsLog.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Views.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
}

// Genuine checkpoints replayed at the end of their subject (hash and
// signature intact; the first two of three, so the second even links to
// the first)
// are quarantined, and the gateway's next checkpoint still follows the
// last valid one: sealing goes on, and audit verify names only the
// replays. (The sealer chained onto the log's latest message, which passed
// its own checks, so every later checkpoint was quarantined.)
func TestReplayedCheckpointsDoNotBreakTheChain(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	g := trustGateway(t, dataDir)
	c := client(g)
	js := attacker(t, g)
	audStream, err := js.Stream(ctx, server.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	cpSubject := server.CheckpointSubject(ledger.ExecutionsStream)
	var genuine [][]byte
	for i := range 3 {
		if _, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": fmt.Sprint("cp-", i)}), "", "1")); err != nil {
			t.Fatal(err)
		}
		waitViews(t, g)
		if err := g.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := audStream.GetLastMsgForSubject(ctx, cpSubject)
		if err != nil {
			t.Fatalf("no checkpoint sealed: %v", err)
		}
		genuine = append(genuine, m.Data)
	}
	var replays []uint64
	for _, data := range genuine[:2] { // the first two again, after the third
		ack, err := js.Publish(ctx, cpSubject, data)
		if err != nil {
			t.Fatal(err)
		}
		replays = append(replays, ack.Sequence)
	}
	waitQuarantined(t, g, 2)
	for i := range 2 {
		if _, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": fmt.Sprint("after-", i)}), "", "1")); err != nil {
			t.Fatal(err)
		}
		waitViews(t, g)
		if err := g.Seal(ctx); err != nil {
			t.Fatalf("seal after the replays: %v", err)
		}
	}
	info, err := audStream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq <= replays[1]+1 {
		t.Fatalf("no two checkpoints after the replays (audit stream ends at %d)", info.State.LastSeq)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.Views.StreamWaitFor(wctx, server.AuditStream, info.State.LastSeq); err != nil {
		t.Fatalf("checkpoints not folded: %v", err)
	}
	if n := g.Quarantined(); n != 2 {
		t.Fatalf("quarantined %d, want the 2 replays only", n)
	}
	out, err := exec.Command(binary, "audit", "verify", "--json", "--nats-url", g.NatsURL, "--data-dir", dataDir).Output()
	var rep audit.Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err == nil {
		t.Fatalf("audit verify: %v %v\n%s", err, jerr, out)
	}
	if len(rep.Failures) != 2 || rep.Failures[0].Seq != replays[0] && rep.Failures[1].Seq != replays[0] {
		t.Fatalf("verify failures %+v, want the replays at %v", rep.Failures, replays)
	}
}
