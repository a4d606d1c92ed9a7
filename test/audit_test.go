package test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
)

func readLines(t *testing.T, file string) []audit.Line {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
	for sc.Scan() {
		var l audit.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func writeLines(t *testing.T, file string, ls []audit.Line) {
	t.Helper()
	var b strings.Builder
	for _, l := range ls {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tampered copies an export and lets change edit the executions file.
func tampered(t *testing.T, src string, change func([]audit.Line) []audit.Line) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		name := de.Name()
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dst, ledger.ExecutionsStream+".jsonl")
	writeLines(t, file, change(readLines(t, file)))
	return dst
}

func wantFailure(t *testing.T, dir string, seq uint64, reason string) {
	t.Helper()
	rep, err := audit.ReadExport(dir, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		if f.Seq == seq && strings.Contains(f.Reason, reason) {
			return
		}
	}
	t.Fatalf("no failure at seq %d mentioning %q: %+v", seq, reason, rep.Failures)
}

// The record verifies offline from an export and live; each kind of
// tampering is detected at the right place.
func TestAuditVerifyDetectsTampering(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	bc := portcullisv1connect.NewBudgetServiceClient(http.DefaultClient, "http://"+addr)
	mustOK(t)(bc.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 1000, Currency: "GBP"})))
	mustOK(t)(bc.Reserve(ctx, reserve("acme", "op-1", "sha256:x", 100)))
	for i := range 4 {
		res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": i}), "", "1"))
		if err != nil {
			t.Fatal(err)
		}
		id := res.Msg.GetExecution().GetExecutionId()
		mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})))
		mustOK(t)(c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: 201})))
	}
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	export := filepath.Join(t.TempDir(), "export")
	if out, err := exec.Command(binary, "export", "--nats-url", natsURL, "--data-dir", dataDir, "--out", export).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	for _, src := range [][]string{{"--from", export}, {"--nats-url", natsURL, "--data-dir", dataDir}} {
		out, err := exec.Command(binary, append([]string{"audit", "verify"}, src...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "verified") || !strings.Contains(string(out), "14 events") {
			t.Fatalf("verify %v of a clean ledger: %v\n%s", src, err, out)
		}
	}

	// A partial export (one execution) is for analysts, and is not verified.
	first := readLines(t, filepath.Join(export, ledger.ExecutionsStream+".jsonl"))[0]
	_, id, _ := ledger.ParseExecutionSubject(first.Subject)
	partial := filepath.Join(t.TempDir(), "partial")
	if out, err := exec.Command(binary, "export", "--nats-url", natsURL, "--data-dir", dataDir, "--out", partial, "--subject", "pc.exec.*."+id).CombinedOutput(); err != nil {
		t.Fatalf("partial export: %v\n%s", err, out)
	}
	if ls := readLines(t, filepath.Join(partial, ledger.ExecutionsStream+".jsonl")); len(ls) != 3 {
		t.Fatalf("partial export holds %d events, want the execution's 3", len(ls))
	}
	if _, err := audit.ReadExport(partial, audit.VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "partial export") {
		t.Fatalf("verify of a partial export: %v", err)
	}

	// One byte changed in an event's payload.
	wantFailure(t, tampered(t, export, func(ls []audit.Line) []audit.Line {
		d := ls[5].Data
		d[len(d)-3] ^= 0x01
		return ls
	}), 6, "")
	// An event removed from the middle of a subject (execution 1: seq 4..6).
	wantFailure(t, tampered(t, export, func(ls []audit.Line) []audit.Line {
		return append(ls[:4:4], ls[5:]...)
	}), 6, "chain broken")
	// Two events of one subject swapped (the chain goes on from the last
	// valid event, so the first of the two out of place is the one named).
	wantFailure(t, tampered(t, export, func(ls []audit.Line) []audit.Line {
		ls[4], ls[5] = ls[5], ls[4]
		return ls
	}), 6, "chain broken")
	// The tail truncated.
	wantFailure(t, tampered(t, export, func(ls []audit.Line) []audit.Line { return ls[:len(ls)-2] }), 10, "truncated")
	// An event rewritten and re-signed with a key that is not a recorded gateway's.
	_, rogue, _ := ed25519.GenerateKey(nil)
	wantFailure(t, tampered(t, export, func(ls []audit.Line) []audit.Line {
		ev := new(pb.Event)
		if err := proto.Unmarshal(ls[8].Data, ev); err != nil {
			t.Fatal(err)
		}
		ev.GetExecutionChanged().GetExecution().TargetStatus = 500
		ledger.Seal(ev, ev.GetPrevHash())
		ledger.Sign(ev, rogue)
		ls[8].Data = must(proto.Marshal(ev))
		return ls
	}), 9, "signature does not verify")
	// The CLI exits non-zero on a tampered export.
	bad := tampered(t, export, func(ls []audit.Line) []audit.Line { return ls[:len(ls)-1] })
	if out, err := exec.Command(binary, "audit", "verify", "--from", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "FAIL") {
		t.Fatalf("verify of a truncated export: %v\n%s", err, out)
	}
}

// Signed checkpoints catch what chains alone cannot: a stream truncated
// (with a manifest made to match) and a checkpoint forged with a gateway's
// own key.
func TestAuditCheckpoints(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	serveProcess(t, dataDir, addr, cfg, "--checkpoint-every", "100ms")
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	for i := range 5 {
		mustOK(t)(c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": i}), "", "1")))
	}
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	export := filepath.Join(t.TempDir(), "export")
	deadline := time.Now().Add(10 * time.Second)
	for {
		os.RemoveAll(export)
		if out, err := exec.Command(binary, "export", "--nats-url", natsURL, "--data-dir", dataDir, "--out", export).CombinedOutput(); err != nil {
			t.Fatalf("export: %v\n%s", err, out)
		}
		var cps []audit.Line
		if _, err := os.Stat(filepath.Join(export, "PORTCULLIS_AUDIT.jsonl")); err == nil {
			cps = readLines(t, filepath.Join(export, "PORTCULLIS_AUDIT.jsonl"))
		}
		if len(cps) > 0 {
			ev := new(pb.Event)
			if proto.Unmarshal(cps[len(cps)-1].Data, ev) == nil && ev.GetCheckpoint().GetLastSeq() == 5 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint over the 5 events")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rep, err := audit.ReadExport(export, audit.VerifyOptions{}); err != nil || !rep.OK {
		t.Fatalf("clean export with checkpoints: %+v %v", rep.Failures, err)
	}

	// Truncate the executions and make the manifest agree: the checkpoint
	// still covers sequence 5.
	cut := tampered(t, export, func(ls []audit.Line) []audit.Line { return ls[:3] })
	var man audit.Manifest
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(cut, "manifest.json"))), &man); err != nil {
		t.Fatal(err)
	}
	se := man.Streams[ledger.ExecutionsStream]
	se.Events, se.LastSeq = 3, 3
	man.Streams[ledger.ExecutionsStream] = se
	if err := os.WriteFile(filepath.Join(cut, "manifest.json"), must(json.Marshal(man)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.ReadExport(cut, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(rep.Failures), "truncated: a checkpoint covers sequence 5") {
		t.Fatalf("truncation with a matching manifest: %+v", rep.Failures)
	}

	// Forge the last checkpoint, signed with the gateway's own key.
	seed := must(hex.DecodeString(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "gateway.ed25519")))))))
	key := ed25519.NewKeyFromSeed(seed)
	forged := tampered(t, export, func(ls []audit.Line) []audit.Line { return ls })
	cpFile := filepath.Join(forged, "PORTCULLIS_AUDIT.jsonl")
	cps := readLines(t, cpFile)
	last := &cps[len(cps)-1]
	ev := new(pb.Event)
	if err := proto.Unmarshal(last.Data, ev); err != nil {
		t.Fatal(err)
	}
	ev.GetCheckpoint().RunningDigest[0] ^= 0xff
	ledger.Seal(ev, ev.GetPrevHash())
	ledger.Sign(ev, key)
	last.Data = must(proto.Marshal(ev))
	writeLines(t, cpFile, cps)
	rep, err = audit.ReadExport(forged, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(rep.Failures), "does not match the events up to it") {
		t.Fatalf("forged checkpoint: %+v", rep.Failures)
	}
}

// Replay of an export into fresh views equals the live views.
func TestReplayOfExportEqualsLiveViews(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	proc := serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)
	bc := portcullisv1connect.NewBudgetServiceClient(http.DefaultClient, "http://"+addr)
	mustOK(t)(bc.SetLimit(ctx, connect.NewRequest(&pb.SetLimitRequest{Account: "acme", Limit: 1000, Currency: "GBP"})))
	mustOK(t)(bc.Reserve(ctx, reserve("acme", "op-1", "sha256:x", 100)))
	for i := range 30 {
		res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": i % 12}), "", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.GetDecision() == pb.Decision_DECISION_NEW {
			mustOK(t)(c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: res.Msg.GetExecution().GetExecutionId()})))
		}
	}
	natsURL := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	export := filepath.Join(t.TempDir(), "export")
	if out, err := exec.Command(binary, "export", "--nats-url", natsURL, "--data-dir", dataDir, "--out", export).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	replayed := filepath.Join(t.TempDir(), "views")
	out, err := exec.Command(binary, "replay", "--from", export, "--views", replayed).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "events/s") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	// Stop the gateway (its views are complete once it shut down) and compare.
	if err := proc.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_, _ = proc.Process.Wait()
	live := dumpViews(t, filepath.Join(dataDir, "views"))
	rep := dumpViews(t, replayed)
	// The shutdown sealed a last checkpoint after the export was taken, and
	// the views fold checkpoints (their links): the checkpoints stream's
	// rows are the one part the export cannot hold yet.
	for _, views := range []map[string][]byte{live, rep} {
		for k := range views {
			if k == "c/PORTCULLIS_AUDIT" || k == "g/PORTCULLIS_AUDIT" || strings.HasPrefix(k, "l/pc.audit.") {
				delete(views, k)
			}
		}
	}
	for k := range live {
		if _, ok := rep[k]; !ok {
			t.Errorf("row %q only live", k)
		}
	}
	if len(live) < 40 || len(live) != len(rep) {
		t.Fatalf("live views %d rows, replayed %d", len(live), len(rep))
	}
	for k, v := range live {
		if string(rep[k]) != string(v) {
			t.Fatalf("row %q differs", k)
		}
	}
}
