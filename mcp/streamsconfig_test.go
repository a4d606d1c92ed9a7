package mcp

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
)

// The response streams' stream denies message delete and purge like every
// stream of the ledger: even the NATS admin user can neither purge it nor
// delete one of its events (its age and size limits still drop old ones).
// A stream an earlier version made without them gets them when the admin
// ensures it (a server may turn them on); a user that may not change
// streams keeps it as it is and is told how to fix it.
func TestStreamsStreamDeniesDeleteAndPurge(t *testing.T) {
	ctx := context.Background()
	denies := func(t *testing.T, s jetstream.Stream) bool {
		t.Helper()
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.DenyDelete && info.Config.DenyPurge
	}

	t.Run("new", func(t *testing.T) {
		_, admin := natstest.Start(t)
		js, _ := jetstream.New(admin)
		e, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !denies(t, e.stream) {
			t.Fatal("a new stream allows delete or purge")
		}
		if err := e.Append(ctx, "sess-1", "stream-1", []byte("e0")); err != nil {
			t.Fatal(err)
		}
		if err := e.stream.Purge(ctx); err == nil {
			t.Fatal("the admin purged the stream")
		}
		if err := e.stream.DeleteMsg(ctx, 1); err == nil {
			t.Fatal("the admin deleted an event")
		}
		if got, err := collect(t, e, -1); err != nil || len(got) != 1 || got[0] != "e0" {
			t.Fatalf("after the refused purge and delete: %v %v", got, err)
		}
	})

	for _, disk := range []bool{false, true} {
		old := StreamsConfig(1) // as an earlier version made it
		if disk {
			old = diskStreamsConfig(1)
		}
		old.DenyDelete, old.DenyPurge = false, false
		t.Run("earlier/"+old.Storage.String(), func(t *testing.T) {
			_, admin := natstest.Start(t)
			js, _ := jetstream.New(admin)
			if _, err := js.CreateStream(ctx, old); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s, err := EnsureStreamsStream(ctx, js, 1, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !denies(t, s) {
				t.Fatal("the admin's update left delete or purge allowed")
			}
			if info, _ := s.Info(ctx); info.Config.Storage != old.Storage {
				t.Fatalf("storage %v, want %v kept", info.Config.Storage, old.Storage)
			}
			if strings.Contains(logs.String(), "deny_purge") {
				t.Fatalf("warned although the update was made: %s", logs.String())
			}
		})
	}

	t.Run("earlier, update refused", func(t *testing.T) {
		ns, dir := natstest.StartAuth(t)
		admin, _ := jetstream.New(natstest.Connect(t, ns.ClientURL(), dir, natsauth.Admin))
		old := StreamsConfig(1)
		old.DenyDelete, old.DenyPurge = false, false
		if _, err := admin.CreateStream(ctx, old); err != nil {
			t.Fatal(err)
		}
		gw, _ := jetstream.New(natstest.Connect(t, ns.ClientURL(), dir, natsauth.Gateway))
		var logs bytes.Buffer
		s, err := EnsureStreamsStream(ctx, gw, 1, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("a gateway on a stream it may not update: %v", err)
		}
		if denies(t, s) {
			t.Fatal("a gateway changed the stream")
		}
		if l := logs.String(); !strings.Contains(l, "deny_purge") || !strings.Contains(l, "portcullis streams") || !strings.Contains(l, "--deny-purge") {
			t.Fatalf("no warning saying how to fix it: %s", l)
		}
	})
}
