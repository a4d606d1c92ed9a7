package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
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
