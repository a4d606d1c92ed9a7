package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// A gateway joining with --nats-url and no key of its own adopts the key
// the ledger shares, so retries through either gateway match; a gateway
// with a different key refuses to start.
func TestJoiningGatewayAdoptsSharedKey(t *testing.T) {
	ctx := context.Background()
	n := 0
	opts := func(natsURL, key string) server.Options {
		n++
		o := server.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: natsURL,
			NatsListen: "127.0.0.1:-1", FingerprintKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			GatewayID: fmt.Sprintf("gw-%d", n), RootKey: rootKeyOf(natsURL)}
		if natsURL != "" {
			o.NatsCreds = credsFor(t, natsURL)
		}
		return o
	}
	g1, err := server.Start(ctx, opts("", ""))
	if err != nil {
		t.Fatal(err)
	}
	remember(g1)
	defer g1.Close(ctx)
	registerCreds(g1)
	g2, err := server.Start(ctx, opts(g1.NatsURL, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close(ctx)
	a := args(t, map[string]any{"amount": 7})
	first, err := client(g1).Begin(ctx, beginReq("create_payment", a, "", "1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client(g2).Begin(ctx, beginReq("create_payment", a, "", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Msg.GetDecision() != pb.Decision_DECISION_ATTACHED || second.Msg.GetExecution().GetExecutionId() != first.Msg.GetExecution().GetExecutionId() {
		t.Fatalf("retry through the joined gateway: %v", second.Msg.GetDecision())
	}
	_, err = server.Start(ctx, opts(g1.NatsURL, testKey))
	if err == nil || !strings.Contains(err.Error(), "fingerprint key differs") {
		t.Fatalf("gateway with another key: %v", err)
	}
}

// --no-share-fingerprint-key: the key never enters the ledger (the meta
// stream holds only its check value), so a gateway joining without the key
// cannot adopt it and refuses to start; given the key, it joins.
func TestNoShareFingerprintKey(t *testing.T) {
	ctx := context.Background()
	dir1 := t.TempDir()
	o := server.Options{DataDir: dir1, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1",
		NoShareKey: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GatewayID: "gw-private"}
	g1, err := server.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Close(ctx)
	remember(g1)
	registerCreds(g1)
	nc := natsConnect(t, g1, natsauth.Analyst)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := js.Stream(ctx, "PORTCULLIS_META")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.GetLastMsgForSubject(ctx, "pc.meta.fingerprint_key_check"); err != nil {
		t.Fatalf("no key check recorded: %v", err)
	}
	if m, err := meta.GetLastMsgForSubject(ctx, "pc.meta.fingerprint_key"); err == nil {
		t.Fatalf("the key was shared through the ledger (%d bytes) despite --no-share-fingerprint-key", len(m.Data))
	}
	// Not even sealed: no box of the key for the root or any gateway.
	info, err := meta.Info(ctx, jetstream.WithSubjectFilter("pc.meta.fpkey.>"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(info.State.Subjects); n != 0 {
		t.Fatalf("the key was shared sealed through the ledger (%d boxes) despite --no-share-fingerprint-key", n)
	}
	join := func(key string) (*server.Gateway, error) {
		return server.Start(ctx, server.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: o.ConfigPath, NatsURL: g1.NatsURL,
			NatsCreds: credsFor(t, g1.NatsURL), RootKey: rootKeyOf(g1.NatsURL),
			FingerprintKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GatewayID: "gw-joiner"})
	}
	if g, err := join(""); err == nil || !strings.Contains(err.Error(), "shares none this gateway can open") {
		if g != nil {
			g.Close(ctx)
		}
		t.Fatalf("a gateway without the key joined a ledger that does not share it: %v", err)
	}
	key, err := os.ReadFile(filepath.Join(dir1, "fingerprint.key"))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := join(strings.TrimSpace(string(key)))
	if err != nil {
		t.Fatalf("a gateway given the key: %v", err)
	}
	g2.Close(ctx)
}
