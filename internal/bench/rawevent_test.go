package main

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
)

// The raw ceiling's message is the size of a Begin's ACCEPTED event as the
// suite's gateway stores it (benchkit.RawEvent, docs/performance.md "The
// raw ceiling's message"): read one back from the stream and compare. With
// -v it prints what it read.
func TestRawEventIsBeginsEvent(t *testing.T) {
	ctx := context.Background()
	g, err := startGW(ctx, ledgerConfig, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	res, err := g.Ledger.Begin(ctx, ledger.BeginInput{Action: benchAction(1, "size")})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := g.connect(natsauth.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, res.Execution.GetStreamSeq())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("subject %d characters (%s), data %d bytes, condition on %q", len(m.Subject), m.Subject, len(m.Data),
		m.Header.Get("Nats-Expected-Last-Subject-Sequence-Subject"))
	// Timestamps and ids are varints and base32: a few bytes either way.
	if d := len(m.Data) - benchkit.RawEvent; d < -32 || d > 32 {
		t.Fatalf("a Begin's event is %d bytes, benchkit.RawEvent %d: measure again and set it", len(m.Data), benchkit.RawEvent)
	}
}
