package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/internal/freeport"
	"github.com/portcullis-dev/portcullis/internal/natstest"
)

// The embedded JetStream server runs with fsync on every write (the
// running server's own JetStream config says so); --unsafe-no-fsync is the
// only way to turn it off. Checked on the server, not by timing a crash.
func TestEmbeddedServerSyncsEveryWrite(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		n, err := openNATS(Options{DataDir: t.TempDir(), NatsListen: "127.0.0.1:-1", UnsafeNoFsync: unsafe},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if n.server == nil {
			n.close()
			t.Fatal("no embedded server")
		}
		cfg := n.server.JetStreamConfig()
		n.close()
		if cfg == nil {
			t.Fatal("the embedded server runs without JetStream")
		}
		if cfg.SyncAlways == unsafe {
			t.Fatalf("--unsafe-no-fsync=%v: the embedded JetStream runs with sync_always=%v", unsafe, cfg.SyncAlways)
		}
	}
}

// The embedded server is nats-server with group commit
// (third_party/nats-server): plain publishes its stream loop takes together
// are synced once, and each is acknowledged as before. Many writers chain
// compare-and-set publishes on their own subjects; each also sends one
// whose condition is stale. Every acknowledgement must name the message's
// own sequence, every stale one must be refused, the stream must hold
// exactly what was acknowledged, and some publishes must have shared a sync
// (PlainGroupCommits exists only in the patched server).
func TestEmbeddedServerSyncsPlainPublishesTogether(t *testing.T) {
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST_EVENTS", Subjects: []string{"grp.>"}, Storage: jetstream.FileStorage, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := natsserver.PlainGroupCommits()
	const writers, each = 32, 20
	acked := make([][]uint64, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("grp.w%d", w)
			var last uint64
			for i := range each {
				ack, err := js.Publish(ctx, subj, fmt.Appendf(nil, "%d/%d", w, i), jetstream.WithExpectLastSequencePerSubject(last))
				if err != nil {
					errs <- fmt.Errorf("%s #%d: %w", subj, i, err)
					return
				}
				acked[w] = append(acked[w], ack.Sequence)
				last = ack.Sequence
			}
			_, err := js.Publish(ctx, subj, []byte("stale"), jetstream.WithExpectLastSequencePerSubject(last-1))
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
				errs <- fmt.Errorf("%s: a stale condition got %v", subj, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for w, seqs := range acked {
		for i, seq := range seqs {
			if seen[seq] {
				t.Fatalf("sequence %d acknowledged twice", seq)
			}
			seen[seq] = true
			m, err := stream.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("acknowledged sequence %d: %v", seq, err)
			}
			if want := fmt.Sprintf("%d/%d", w, i); m.Subject != fmt.Sprintf("grp.w%d", w) || string(m.Data) != want {
				t.Fatalf("sequence %d holds %s %q, acknowledged as grp.w%d %q", seq, m.Subject, m.Data, w, want)
			}
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != writers*each || info.State.LastSeq != writers*each {
		t.Fatalf("the stream holds %d messages up to %d, %d were acknowledged", info.State.Msgs, info.State.LastSeq, writers*each)
	}
	if after, _ := natsserver.PlainGroupCommits(); after == groups {
		t.Fatal("no two of the publishes shared a sync")
	}
}

// The fsync check reads every listed monitoring endpoint: one that does
// not answer (a node down) is named in a warning and the others decide;
// none answering, or one answering that it does not fsync, refuses.
func TestSyncCheckGoesOnWithoutADeadNode(t *testing.T) {
	synced := natstest.StartCluster(t, 1, natstest.ClusterOptions{})
	unsynced := natstest.StartCluster(t, 1, natstest.ClusterOptions{NoSync: true})
	dead := "http://127.0.0.1:" + strconv.Itoa(freeport.Take(t, 1)[0]) // nobody listens there
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	check := func(monitors ...string) error {
		return checkSyncAlways(Options{NatsMonitorURL: strings.Join(monitors, ",")}, nil, lg)
	}
	if err := check(synced.MonitorURL(0), dead); err != nil {
		t.Fatalf("one node down: %v", err)
	}
	if !strings.Contains(logs.String(), dead) {
		t.Fatalf("the warning does not name %s: %q", dead, logs.String())
	}
	if err := check(dead); err == nil || !strings.Contains(err.Error(), "no server's monitoring endpoint answered") {
		t.Fatalf("no node answering: %v", err)
	}
	if err := check(synced.MonitorURL(0), unsynced.MonitorURL(0), dead); err == nil || !strings.Contains(err.Error(), "does not fsync every write") {
		t.Fatalf("a node without fsync: %v", err)
	}
}
