package audit_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"syscall"
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
	dir, _ := writeSignedExport(b, n)
	return dir
}

// writeSignedExport also returns the keyring of the export's ledger.
func writeSignedExport(b *testing.B, n int) (string, *trust.Keyring) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "export")
	_, key, _ := ed25519.GenerateKey(nil)
	lt := benchTrust(b, key)
	w, err := audit.NewWriter(dir, lt, key)
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
	a, err := lt.UnpinnedAnchor()
	if err != nil {
		b.Fatal(err)
	}
	kr := trust.NewKeyring(a.Root, nil)
	for _, e := range lt.Enrollments {
		sr := new(pb.SignedRecord)
		if err := proto.Unmarshal(e, sr); err != nil {
			b.Fatal(err)
		}
		if _, err := kr.Add(sr); err != nil {
			b.Fatal(err)
		}
	}
	return dir, kr
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

// BenchmarkReplayExport: fold b.N exported events into fresh Pebble views,
// checking hash, chain and transition (signed=false) and also every
// event's signature against the enrolled keys (signed=true), as a gateway
// does. The difference is the cost of verify on fold.
//
//	go test ./audit/ -run '^$' -bench ReplayExport -benchtime 20000x
//
// With own=true the events were signed by this process (a gateway folding
// its own writes), which remembers its signatures and skips the verify.
func BenchmarkReplayExport(b *testing.B) {
	for _, c := range []struct{ signed, own bool }{{false, false}, {true, false}, {true, true}} {
		b.Run(fmt.Sprintf("signed=%v/own=%v", c.signed, c.own), func(b *testing.B) { benchReplay(b, c.signed, c.own) })
	}
}

func benchReplay(b *testing.B, signed, own bool) {
	dir, kr := writeSignedExport(b, b.N)
	if !own {
		ledger.ForgetOwnSignatures()
	}
	v, err := pebbleviews.Open(filepath.Join(b.TempDir(), "views"))
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	p := projector.New(ledger.ExecutionsStream, audit.ExportSource{Dir: dir, Stream: ledger.ExecutionsStream}, v, nil)
	if signed {
		p.SetKeys(kr)
	}
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuTime()
	if err := p.CatchUp(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	if p.Quarantined() != 0 {
		b.Fatalf("%d quarantined", p.Quarantined())
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/event")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
