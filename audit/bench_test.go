package audit_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/trust"
)

// writeExport writes an export of n signed, chained execution events
// (accepted → dispatched → result observed per execution).
func writeExport(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "export")
	_, key, _ := ed25519.GenerateKey(nil)
	w, err := audit.NewWriter(dir, benchTrust(b, key), key)
	if err != nil {
		b.Fatal(err)
	}
	steps := []struct {
		t pb.EventType
		s pb.State
	}{
		{pb.EventType_EVENT_TYPE_ACCEPTED, pb.State_STATE_ACCEPTED},
		{pb.EventType_EVENT_TYPE_DISPATCHED, pb.State_STATE_DISPATCHED},
		{pb.EventType_EVENT_TYPE_RESULT_OBSERVED, pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED},
	}
	now := time.Now()
	var prev []byte
	var x *pb.Execution
	for seq := 1; seq <= n; seq++ {
		i := (seq - 1) % 3
		if i == 0 {
			id := "act_" + ulid.Make().String()
			x = &pb.Execution{ExecutionId: id, IntentToken: fmt.Sprintf("f%062x", seq), Tool: "create_payment", Actor: "agent-7",
				RetryClass: pb.RetryClass_RETRY_CLASS_IDEMPOTENCY_KEY, AcceptedAt: timestamppb.New(now),
				CanonicalRecord: `{"actor":"agent-7","arguments":{"amount":1200,"currency":"GBP"},"tool":"create_payment"}`}
			prev = nil
		}
		x = proto.Clone(x).(*pb.Execution)
		x.State = steps[i].s
		subj := ledger.ExecutionSubject(x.GetIntentToken(), x.GetExecutionId())
		ev := &pb.Event{EventId: fmt.Sprintf("evt_%d", seq), Type: steps[i].t, Subject: subj, ExecutionId: x.GetExecutionId(),
			TimeUnixNano: now.UnixNano(), GatewayId: "gw-bench", Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{Execution: x}}}
		ledger.Seal(ev, prev)
		ledger.Sign(ev, key)
		prev = ev.Hash
		data, _ := proto.Marshal(ev)
		if err := w.Add(audit.Record{Stream: ledger.ExecutionsStream, Seq: uint64(seq), Subject: subj, Data: data}, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchTrust is a ledger whose root enrolled gw-bench with key.
func benchTrust(b *testing.B, key ed25519.PrivateKey) audit.LedgerTrust {
	_, root, _ := ed25519.GenerateKey(nil)
	rb, err := proto.Marshal(trust.NewRoot(root, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	eb, err := proto.Marshal(trust.EnrollSelf(root, key, "gw-bench", "", time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	return audit.LedgerTrust{Root: rb, Enrollments: [][]byte{eb}}
}

// BenchmarkVerifyExport: offline verification (hash, chain, signature,
// sequence, manifest) of b.N events from an export directory.
//
//	go test ./audit/ -run '^$' -bench Export -benchtime 1000000x
func BenchmarkVerifyExport(b *testing.B) {
	dir := writeExport(b, b.N)
	b.ResetTimer()
	start := time.Now()
	rep, err := audit.ReadExport(dir, audit.VerifyOptions{})
	if err != nil || !rep.OK || rep.Events != b.N {
		b.Fatalf("%v %+v", err, rep.Failures)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReplayExport: fold b.N exported events into fresh Pebble views.
func BenchmarkReplayExport(b *testing.B) {
	dir := writeExport(b, b.N)
	v, err := pebbleviews.Open(filepath.Join(b.TempDir(), "views"))
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	p := projector.New(ledger.ExecutionsStream, audit.ExportSource{Dir: dir, Stream: ledger.ExecutionsStream}, v, nil)
	b.ResetTimer()
	start := time.Now()
	if err := p.CatchUp(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}
