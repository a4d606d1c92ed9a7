package server

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

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
