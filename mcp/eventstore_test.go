package mcp

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natstest"
)

var testStreamsKey = StreamsKey(bytes.Repeat([]byte{7}, 32))

func collect(t *testing.T, e *EventStore, index int) ([]string, error) {
	t.Helper()
	return collectFrom(t, e, "stream-1", index)
}

func collectFrom(t *testing.T, e *EventStore, streamID string, index int) ([]string, error) {
	t.Helper()
	var out []string
	for data, err := range e.After(context.Background(), "sess-1", streamID, index) {
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
	a, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
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
	e, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
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
	old, err := OpenEventStore(ctx, js2, 1, testStreamsKey, nil)
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

// What anyone with the gateway NATS credentials can store on a stream's
// subject is not served: a message without a MAC (forged, or stored before
// events carried one), one with a MAC under another key, a genuine event
// copied to a later position, into another stream or another session. The
// indexes the client sees count only the genuine events, and each rejected
// message is reported once however often it is read.
func TestEventStoreServesOnlyGenuineEvents(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	js, _ := jetstream.New(nc)
	e, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	e.OnReject(func(r string) { reasons = append(reasons, r) })
	other, err := OpenEventStore(ctx, js, 1, StreamsKey(bytes.Repeat([]byte{8}, 32)), nil) // another ledger's key
	if err != nil {
		t.Fatal(err)
	}
	subj := streamSubject("sess-1", "stream-1")
	forge := func(m *nats.Msg) {
		t.Helper()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	lastStored := func(subject string) *nats.Msg {
		t.Helper()
		m, err := e.stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		return &nats.Msg{Subject: subject, Data: m.Data, Header: m.Header}
	}

	for _, s := range []string{"stream-1", "stream-2"} {
		if err := e.Open(ctx, "sess-1", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Append(ctx, "sess-1", "stream-1", nil); err != nil { // the SDK's priming event
		t.Fatal(err)
	}
	forge(&nats.Msg{Subject: subj, Data: []byte("forged, no MAC")})
	forge(sealEvent(StreamsKey(bytes.Repeat([]byte{8}, 32)), subj, "sess-1", "stream-1", 1, []byte("forged under another key")))
	if err := other.Append(ctx, "sess-1", "stream-1", []byte("another ledger's gateway")); err != nil {
		t.Fatal(err)
	}
	if err := e.Append(ctx, "sess-1", "stream-1", []byte("e1")); err != nil {
		t.Fatal(err)
	}
	forge(lastStored(subj)) // e1 again, after itself
	if err := e.Append(ctx, "sess-1", "stream-2", []byte("s2-e0")); err != nil {
		t.Fatal(err)
	}
	s2 := lastStored(streamSubject("sess-1", "stream-2"))
	s2.Subject = subj
	forge(s2) // another stream's genuine event
	if err := e.Append(ctx, "sess-1", "stream-1", []byte("e2")); err != nil {
		t.Fatal(err)
	}
	other1 := lastStored(subj)
	other1.Subject = streamSubject("sess-2", "stream-1")
	forge(other1) // into another session's stream

	if got, err := collect(t, e, 0); err != nil || strings.Join(got, ",") != "e1,e2" {
		t.Fatalf("after 0: %q %v; want e1,e2", got, err)
	}
	if got, err := collect(t, e, 1); err != nil || strings.Join(got, ",") != "e2" {
		t.Fatalf("after 1: %q %v; want e2", got, err)
	}
	if got, err := collect(t, e, -1); err != nil || strings.Join(got, ",") != ",e1,e2" {
		t.Fatalf("from the start: %q %v; want the priming event, e1, e2", got, err)
	}
	// The stored messages are 7; the genuine events 3: an index past them
	// is not one a gateway gave.
	if _, err := collect(t, e, 3); !errors.Is(err, sdk.ErrEventsPurged) {
		t.Fatalf("after index 3: %v; want ErrEventsPurged", err)
	}
	if got, err := collectFrom(t, e, "stream-2", -1); err != nil || strings.Join(got, ",") != "s2-e0" {
		t.Fatalf("stream-2: %q %v", got, err)
	}
	var sess2 int
	for _, err := range e.After(ctx, "sess-2", "stream-1", -1) {
		if err != nil {
			t.Fatal(err)
		}
		sess2++
	}
	if sess2 != 0 {
		t.Fatalf("another session's copied event served: %d events", sess2)
	}
	want := []string{RejectMAC, RejectMAC, RejectMAC, RejectPosition, RejectMAC, RejectMAC}
	if strings.Join(reasons, ",") != strings.Join(want, ",") || e.Rejected() != uint64(len(want)) {
		t.Fatalf("rejected %v (%d), want %v once each", reasons, e.Rejected(), want)
	}
}

// A stream whose counted index was forgotten (maxOpenStreams) finds it
// again from its last genuine stored event, past any forged message; and
// an append that failed leaves a gap that a resumption past it refuses.
func TestEventStoreIndexAfterForgettingAndGaps(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.Start(t)
	js, _ := jetstream.New(nc)
	e, err := OpenEventStore(ctx, js, 1, testStreamsKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(ctx, "sess-1", "stream-1"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"e0", "e1"} {
		if err := e.Append(ctx, "sess-1", "stream-1", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, streamSubject("sess-1", "stream-1"), []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := e.SessionClosed(ctx, "sess-1"); err != nil { // forgets the count, as maxOpenStreams would
		t.Fatal(err)
	}
	if err := e.Append(ctx, "sess-1", "stream-1", []byte("e2")); err != nil {
		t.Fatal(err)
	}
	if got, err := collect(t, e, 0); err != nil || strings.Join(got, ",") != "e1,e2" {
		t.Fatalf("after 0: %q %v; want e1,e2", got, err)
	}

	// An append that failed still took its index (the SDK gave the event
	// its id): the next event is stored past the gap.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Append(cctx, "sess-1", "stream-1", []byte("e3, not stored")); err == nil {
		t.Fatal("an append with a cancelled context succeeded")
	}
	if err := e.Append(ctx, "sess-1", "stream-1", []byte("e4")); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, e, 1); !errors.Is(err, sdk.ErrEventsPurged) {
		t.Fatalf("after 1, across the gap: %v; want ErrEventsPurged and nothing yielded", err)
	}
	if got, err := collect(t, e, 3); err != nil || strings.Join(got, ",") != "e4" {
		t.Fatalf("after 3: %q %v; want e4", got, err)
	}
}
