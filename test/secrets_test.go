package test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// scanStored reads every message of every stream of g's JetStream (data
// and headers) and every key and value of its Pebble views, and fails if
// secret appears anywhere. visible (a plain argument of the same call)
// must appear in the executions stream and in the views, so the scan is
// known to read what the call stored.
func scanStored(t *testing.T, g *server.Gateway, secret, visible string) {
	t.Helper()
	ctx := context.Background()
	nc := natsConnect(t, g, natsauth.Analyst) // reads every stream
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range g.Lanes.Streams() { // every execution shard folded
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Views.StreamWaitFor(ctx, name, must(st.Info(ctx)).State.LastSeq); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	streams := 0
	lister := js.ListStreams(ctx)
	for info := range lister.Info() {
		streams++
		name := info.Config.Name
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // a deleted message
			}
			raw := append([]byte(m.Subject), m.Data...)
			for k, vs := range m.Header {
				raw = append(raw, k...)
				for _, v := range vs {
					raw = append(raw, v...)
				}
			}
			if bytes.Contains(raw, []byte(secret)) {
				t.Fatalf("the secret is stored in the clear in stream %s, message %d (%s)", name, seq, m.Subject)
			}
			if bytes.Contains(raw, []byte(visible)) {
				seen[name] = true
			}
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	if streams < 4 {
		t.Fatalf("scanned %d streams; the gateway keeps executions, budget, audit, MCP sessions and meta", streams)
	}
	inShard := false
	for name := range seen {
		_, isShard := ledger.StreamLane(name)
		inShard = inShard || isShard
	}
	if !inShard {
		t.Fatalf("the call's plain argument %q is in no message of %v: the scan reads nothing", visible, g.Lanes.Streams())
	}
	dump, err := g.Views.Dump()
	if err != nil {
		t.Fatal(err)
	}
	inViews := false
	for k, v := range dump {
		if strings.Contains(k, secret) || bytes.Contains(v, []byte(secret)) {
			t.Fatalf("the secret is stored in the clear in the views (key %q)", k)
		}
		inViews = inViews || bytes.Contains(v, []byte(visible))
	}
	if !inViews {
		t.Fatalf("the call's plain argument %q is in no view: the scan reads nothing", visible)
	}
}
