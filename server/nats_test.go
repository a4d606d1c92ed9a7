package server

import (
	"io"
	"log/slog"
	"testing"
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
