package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/telemetry"
)

// A server's copy of a ledger stream that counts deleted messages lacks
// them (the ledger's streams deny delete and purge): the watch reads every
// server's /jsz, serves the count per copy, logs the copy as an error once
// per count, and leaves other streams and unreadable servers out. The
// deleted message is made here by a stream created without the ledger's
// denials, the only way to put a hole in a stream on purpose; a store
// fault makes the same hole in a real ledger stream (docs/faults.md).
func TestReplicaWatchReportsMissingMessages(t *testing.T) {
	ctx := context.Background()
	c := natstest.StartCluster(t, 1, natstest.ClusterOptions{})
	js, err := jetstream.New(natstest.Connect(t, c.URL(0), c.CredsDir, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	audit := streamOf(t, js, AuditStream, "pc.audit.x", 1, 3)
	streamOf(t, js, natstest.TestStreams.Budget, "pc.budget.x", 1, 2)
	other := streamOf(t, js, "TEST_EVENTS", "test.events", 1, 3)
	for _, s := range []jetstream.Stream{audit, other} {
		if err := s.DeleteMsg(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}

	var logs bytes.Buffer
	w := newReplicaWatch([]string{c.MonitorURL(0), "http://127.0.0.1:1"}, []string{AuditStream, natstest.TestStreams.Budget}, slog.New(slog.NewTextHandler(&logs, nil)))
	m := telemetry.NewMetrics()
	m.Watch(telemetry.LedgerState{Replicas: w.Replicas})
	w.check(ctx)
	missing := func(stream string) float64 {
		t.Helper()
		for _, r := range w.Replicas() {
			if r.Stream == stream {
				if r.Server != "n0" {
					t.Fatalf("%s read from server %q, want n0", stream, r.Server)
				}
				return float64(r.Missing)
			}
		}
		t.Fatalf("no reading of %s: %+v", stream, w.Replicas())
		return 0
	}
	if got := missing(AuditStream); got != 1 {
		t.Fatalf("%s: %v messages missing, want 1", AuditStream, got)
	}
	if got := missing(natstest.TestStreams.Budget); got != 0 {
		t.Fatalf("budget stream: %v missing, want 0", got)
	}
	if n := len(w.Replicas()); n != 2 {
		t.Fatalf("%d copies read, want 2 (TEST_EVENTS is not a ledger stream): %+v", n, w.Replicas())
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "portcullis_stream_replica_missing_messages" {
			for _, s := range mf.GetMetric() {
				series++
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["stream"] == AuditStream && (s.GetGauge().GetValue() != 1 || labels["server"] != "n0" || labels["account"] == "") {
					t.Fatalf("gauge of %s: %v %v", AuditStream, labels, s.GetGauge().GetValue())
				}
			}
		}
	}
	if series != 2 {
		t.Fatalf("gauge: %d series, want 2", series)
	}
	if got := strings.Count(logs.String(), "level=ERROR"); got != 1 || !strings.Contains(logs.String(), "stream="+AuditStream) || !strings.Contains(logs.String(), "server=n0") || !strings.Contains(logs.String(), "holds the only copy") {
		t.Fatalf("want one error naming %s on n0:\n%s", AuditStream, logs.String())
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 || !strings.Contains(logs.String(), "monitor=http://127.0.0.1:1") {
		t.Fatalf("want one warning for the unreadable server:\n%s", logs.String())
	}

	// The same count again: nothing new in the log; one more hole: logged again.
	w.check(ctx)
	if got := strings.Count(logs.String(), "level=ERROR") + strings.Count(logs.String(), "level=WARN"); got != 2 {
		t.Fatalf("a second check of the same state logged again:\n%s", logs.String())
	}
	if err := audit.DeleteMsg(ctx, 3); err != nil {
		t.Fatal(err)
	}
	w.check(ctx)
	if got := missing(AuditStream); got != 2 {
		t.Fatalf("%s: %v missing, want 2", AuditStream, got)
	}
	if got := strings.Count(logs.String(), "level=ERROR"); got != 2 {
		t.Fatalf("a new count is logged again:\n%s", logs.String())
	}

	// A copy the server no longer holds is no longer counted.
	if err := js.DeleteStream(ctx, AuditStream); err != nil {
		t.Fatal(err)
	}
	w.check(ctx)
	if rs := w.Replicas(); len(rs) != 1 || rs[0].Stream != natstest.TestStreams.Budget {
		t.Fatalf("after the stream left the server: %+v, want the budget stream's copy only", rs)
	}
}

// On a cluster each server's copy is read, and the remedy names the
// copy's directories (its raft group), the way to have it copied again
// from the leader.
func TestReplicaWatchReadsEveryServer(t *testing.T) {
	ctx := context.Background()
	c := natstest.StartCluster(t, 3, natstest.ClusterOptions{})
	js, err := jetstream.New(natstest.Connect(t, c.URL(0), c.CredsDir, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	s := streamOf(t, js, AuditStream, "pc.audit.x", 3, 3)
	if err := s.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	w := newReplicaWatch([]string{c.MonitorURL(0), c.MonitorURL(1), c.MonitorURL(2)}, []string{AuditStream}, slog.New(slog.NewTextHandler(&logs, nil)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.check(ctx)
		servers := map[string]bool{}
		for _, r := range w.Replicas() {
			if r.Missing == 1 {
				servers[r.Server] = true
			}
		}
		if len(servers) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("copies missing one message: %v, want n0, n1, n2: %+v", servers, w.Replicas())
		}
		time.Sleep(100 * time.Millisecond) // a follower applying the delete
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.counts {
		if r.RaftGroup == "" || r.AccountID == "" || !strings.Contains(logs.String(), "<store_dir>/jetstream/"+r.AccountID+"/streams/"+AuditStream+" and <store_dir>/jetstream/$SYS/_js_/"+r.RaftGroup+"), start it again") {
			t.Fatalf("the remedy for %s does not name its raft group %q:\n%s", r.Server, r.RaftGroup, logs.String())
		}
	}
}

// streamOf creates stream name on subject, with replicas copies and
// without the ledger's denials (so a test may delete a message), holding
// msgs messages.
func streamOf(t *testing.T, js jetstream.JetStream, name, subject string, replicas, msgs int) jetstream.Stream {
	t.Helper()
	ctx := context.Background()
	var s jetstream.Stream
	err := ljs.Retry(ctx, slog.New(slog.DiscardHandler), "create "+name, func(ctx context.Context) (err error) {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Replicas: replicas})
		return err // a cluster still forming has no peers for the replicas yet: retried
	})
	if err != nil {
		t.Fatal(err)
	}
	for range msgs {
		if _, err := js.Publish(ctx, subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
