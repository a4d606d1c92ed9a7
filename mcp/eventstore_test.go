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
