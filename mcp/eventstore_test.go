package mcp

import (
	"context"
	"errors"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natstest"
)

func collect(t *testing.T, e *EventStore, index int) ([]string, error) {
	t.Helper()
	var out []string
	for data, err := range e.After(context.Background(), "sess-1", "stream-1", index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
	return out, nil
}

// Events appended through one gateway are replayed, after any index,
// through another gateway's store on the same JetStream.
func TestEventStoreOnJetStream(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	js, _ := jetstream.New(nc)
	a, err := OpenEventStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenEventStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"e0", "e1", "e2"} {
		if err := a.Append(ctx, "sess-1", "stream-1", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Append(ctx, "sess-2", "stream-1", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, b, 0); err != nil || len(got) != 2 || got[0] != "e1" || got[1] != "e2" {
		t.Fatalf("after 0: %v %v", got, err)
	}
	if got, err := collect(t, b, -1); err != nil || len(got) != 3 {
		t.Fatalf("from the start: %v %v", got, err)
	}
	if got, err := collect(t, b, 2); err != nil || len(got) != 0 {
		t.Fatalf("after the last: %v %v", got, err)
	}
	if _, err := collect(t, b, 7); !errors.Is(err, sdk.ErrEventsPurged) {
		t.Fatalf("after an event that does not exist: %v", err)
	}
}

// The response streams' stream is made in memory; one an earlier version
// made on disk is kept on disk (its storage cannot change in place) and
// still serves.
func TestEventStoreInMemoryOrKeptOnDisk(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	js, _ := jetstream.New(nc)
	e, err := OpenEventStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.Storage != jetstream.MemoryStorage || c.MaxBytes != streamsMaxBytes || c.MaxAge != streamsMaxAge {
		t.Fatalf("a new stream: storage %v, max bytes %d, max age %v; want memory, %d, %v", c.Storage, c.MaxBytes, c.MaxAge, streamsMaxBytes, streamsMaxAge)
	}

	_, nc2 := natstest.Start(t)
	js2, _ := jetstream.New(nc2)
	if _, err := js2.CreateStream(ctx, diskStreamsConfig(1)); err != nil {
		t.Fatal(err)
	}
	old, err := OpenEventStore(ctx, js2, 1)
	if err != nil {
		t.Fatalf("a stream made on disk before: %v", err)
	}
	if info, err := old.stream.Info(ctx); err != nil || info.Config.Storage != jetstream.FileStorage {
		t.Fatalf("a stream made on disk before: %v, %v; want it kept on disk", info, err)
	}
	if err := old.Append(ctx, "sess-1", "stream-1", []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, old, -1); err != nil || len(got) != 1 || got[0] != "e0" {
		t.Fatalf("read back from the disk stream: %v %v", got, err)
	}
}
