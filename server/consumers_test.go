package server

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
)

// Streams made before the ledger bounded its consumers' idle time keep
// idle consumers for good: a gateway's user cannot change them and says
// so; the admin (`portcullis streams`, or serve on the embedded server)
// adds the limit and changes nothing else. From then on a reader's durable
// consumer gets the limit, and one asking for more is refused.
func TestOldStreamsGetTheConsumerLimit(t *testing.T) {
	ctx := context.Background()
	js := jetStreamsAs(t, natsauth.Admin, natsauth.Gateway, natsauth.Analyst)
	admin, gw, analyst := js[0], js[1], js[2]
	olds := append(streamConfigs(1), mcp.StreamsConfig(1), laneSpec(1, 1).Config())
	for _, cfg := range olds {
		// As an earlier version made it, with a limit an operator set.
		cfg.ConsumerLimits = jetstream.StreamConsumerLimits{MaxAckPending: 1000}
		if _, err := admin.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	configs := func() map[string]jetstream.StreamConfig {
		t.Helper()
		out := map[string]jetstream.StreamConfig{}
		for _, cfg := range olds {
			s, err := admin.Stream(ctx, cfg.Name)
			if err != nil {
				t.Fatal(err)
			}
			out[cfg.Name] = s.CachedInfo().Config
		}
		return out
	}
	before := configs()
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))

	// A gateway's user: the streams stay as they are, the log names them
	// and what to run.
	setUp := func(n *natsConn) {
		t.Helper()
		if err := n.ensureStreams(ctx, 1, lg); err != nil {
			t.Fatal(err)
		}
		if err := n.ensureLanes(ctx, 1, 2, lg); err != nil {
			t.Fatal(err)
		}
	}
	setUp(&natsConn{js: gw, role: natsauth.Gateway})
	for name, cfg := range configs() {
		if ljs.BoundsConsumers(cfg) {
			t.Fatalf("the gateway's user changed %s", name)
		}
		if !strings.Contains(logs.String(), name) {
			t.Fatalf("the warning does not name %s: %q", name, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "portcullis streams") {
		t.Fatalf("the warning does not say what to run: %q", logs.String())
	}

	// The admin adds the limit to every stream, nothing else.
	setUp(&natsConn{js: admin, role: natsauth.Admin})
	for name, cfg := range configs() {
		if !ljs.BoundsConsumers(cfg) {
			t.Fatalf("%s still keeps idle consumers for good: %+v", name, cfg.ConsumerLimits)
		}
		if cfg.ConsumerLimits.MaxAckPending != 1000 {
			t.Fatalf("%s lost the operator's max_ack_pending limit: %+v", name, cfg.ConsumerLimits)
		}
		was := before[name]
		was.ConsumerLimits.InactiveThreshold = cfg.ConsumerLimits.InactiveThreshold
		was.Metadata, cfg.Metadata = nil, nil // the server's own version stamps
		if !reflect.DeepEqual(was, cfg) {
			t.Fatalf("%s changed beyond its consumer limit:\n%+v\n%+v", name, was, cfg)
		}
	}

	// A reader's durable consumer now ends when idle.
	c, err := analyst.CreateOrUpdateConsumer(ctx, ledger.ExecutionsStream, jetstream.ConsumerConfig{Durable: "analyst-job"})
	if err != nil {
		t.Fatalf("analyst creates a durable consumer: %v", err)
	}
	if got := c.CachedInfo().Config.InactiveThreshold; got != ljs.ConsumerIdleMax {
		t.Fatalf("the analyst's durable consumer ends after %v idle, want %v", got, ljs.ConsumerIdleMax)
	}
	if _, err := analyst.CreateOrUpdateConsumer(ctx, ledger.ExecutionsStream, jetstream.ConsumerConfig{Durable: "analyst-forever", InactiveThreshold: 365 * 24 * time.Hour}); err == nil {
		t.Fatal("a consumer asking for a year idle was created")
	}
}

// jetStreamsAs starts a NATS server with the ledger's users and returns a
// JetStream client for each role, in order.
func jetStreamsAs(t *testing.T, roles ...natsauth.Role) []jetstream.JetStream {
	t.Helper()
	ns, creds := natstest.StartAuth(t)
	out := make([]jetstream.JetStream, len(roles))
	for i, role := range roles {
		js, err := jetstream.New(natstest.Connect(t, ns.ClientURL(), creds, role))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = js
	}
	return out
}
