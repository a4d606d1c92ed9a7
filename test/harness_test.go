// Package test holds end-to-end tests: real gateways (package server, or
// the portcullis binary) on a real embedded JetStream and real Pebble views
// in temp dirs, driven through the Connect API over HTTP on 127.0.0.1.
package test

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

const testConfig = `
gateway:
  id: gw-test
tools:
  deploy_release:
    retry: status_query
    match_window: 1h
    fingerprint:
      defaults: {region: us-east-1}
      ignore: [comment]
      secrets: [token]
  create_payment:
    retry: idempotency_key
    match_window: 10m
    timeout: 10m   # dispatch deadline 10m15s: tests that restart gateways still see WAIT
  refund_order:
    retry: idempotency_key
    match_window: 10m
    key_retention: 48h
  bound_deploy:
    channel: http
    target: http://127.0.0.1:1/deploys
    method: POST
    credential_ref: env:DEPLOY_TOKEN
    input_schema:
      type: object
      properties: {release_id: {type: string}, replicas: {type: integer}}
      required: [release_id]
    retry: status_query
    match_window: 1h
  rotate_credentials:
    retry: irreversible
    match_window: until_resolved
    approval: per_use
  get_release:
    retry: read_only
  pay_invoice:
    retry: idempotency_key
    match_window: 10m
    budget: {account: $.account, amount: $.amount, currency: GBP}
`

var testKey = hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// clock is a settable clock shared by a test's gateways.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func writeConfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(p, []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startGateway runs a gateway on the embedded default (natsURL == "") or
// joined to another gateway's NATS.
func startGateway(t testing.TB, natsURL string, clk *clock) *server.Gateway {
	t.Helper()
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: natsURL,
		NatsListen: "127.0.0.1:-1", FingerprintKey: testKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if clk != nil {
		o.Now = clk.Now
	}
	if natsURL != "" {
		o.GatewayID = "gw-joined"
		o.RootKey = rootKeyOf(natsURL)
	}
	if natsURL != "" {
		o.NatsCreds = credsFor(t, natsURL)
	}
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	remember(g)
	t.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

// rootKeys maps a ledger's NATS URL to the root key file its first
// gateway created: a joining test gateway enrolls itself with it, as an
// operator would with --root-key.
var rootKeys sync.Map

func remember(g *server.Gateway) {
	if g.RootKeyPath != "" {
		rootKeys.Store(g.NatsURL, g.RootKeyPath)
	}
}

func rootKeyOf(natsURL string) string {
	if dir := serveDirOf(natsURL); dir != "" {
		return filepath.Join(dir, server.RootKeyFile)
	}
	p, _ := rootKeys.Load(natsURL)
	s, _ := p.(string)
	return s
}

// The embedded NATS servers of a test's gateways require authentication;
// a gateway joining one gets its gateway credentials by URL.
var natsCreds sync.Map // NATS URL → the embedding gateway's data dir credentials

func registerCreds(g *server.Gateway) {
	serveDirs.Delete(g.NatsURL) // an earlier test's serve process had this port
	if f := g.CredsFile(natsauth.Gateway); f != "" {
		natsCreds.Store(g.NatsURL, g)
	}
}

// credsFor is the gateway credential file of the embedded server at url
// (an in-process gateway's or a serve process's).
func credsFor(t testing.TB, url string) string {
	t.Helper()
	if dir := serveDirOf(url); dir != "" {
		return natsauth.Path(dir, natsauth.Gateway)
	}
	g, ok := natsCreds.Load(url)
	if !ok {
		t.Fatalf("no credentials known for %s", url)
	}
	return g.(*server.Gateway).CredsFile(natsauth.Gateway)
}

// natsConnect connects to g's embedded NATS as role.
func natsConnect(t testing.TB, g *server.Gateway, role natsauth.Role) *nats.Conn {
	t.Helper()
	return natsConnectCreds(t, g.NatsURL, g.CredsFile(role), role)
}

// natsConnectDir connects as role to a `portcullis serve` process's
// embedded NATS, with the credentials in its data dir.
func natsConnectDir(t testing.TB, url, dataDir string, role natsauth.Role) *nats.Conn {
	t.Helper()
	return natsConnectCreds(t, url, natsauth.Path(dataDir, role), role)
}

func natsConnectCreds(t testing.TB, url, creds string, role natsauth.Role) *nats.Conn {
	t.Helper()
	auth, err := natsauth.ClientOption(creds)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, auth, natsauth.Inbox(role), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func client(g *server.Gateway) portcullisv1connect.ExecutionServiceClient {
	return portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+g.Addr)
}

func args(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func beginReq(tool string, a *structpb.Struct, opKey, jsonrpcID string) *connect.Request[pb.BeginRequest] {
	return connect.NewRequest(&pb.BeginRequest{
		Action: &pb.Action{
			Actor: "agent-7", Tool: tool, Channel: "http", Target: "deploy-api.internal.example/releases",
			Method: "POST", Arguments: a, IntentScope: "run:5f8097",
		},
		OperationKey: opKey,
		Correlation:  &pb.Correlation{JsonrpcId: jsonrpcID, SessionId: "sess-1"},
	})
}

// ledgerStream opens the executions stream for reading what was appended.
func ledgerStream(t testing.TB, g *server.Gateway) jetstream.Stream {
	t.Helper()
	nc := natsConnect(t, g, natsauth.Analyst)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), ledger.ExecutionsStream)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func streamCount(t testing.TB, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// subjectEvents reads every event on one subject, in order.
func subjectEvents(t testing.TB, s jetstream.Stream, subject string) []*pb.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, n := range info.State.Subjects {
		want += n
	}
	var out []*pb.Event
	for uint64(len(out)) < want {
		batch, err := c.Fetch(int(want)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			ev := new(pb.Event)
			if err := proto.Unmarshal(m.Data(), ev); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return out
}

func wantCode(t testing.TB, err error, code connect.Code, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v", code)
	}
	if got := connect.CodeOf(err); got != code {
		t.Fatalf("got %v (%v), want %v", got, err, code)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not mention %q", err, c)
		}
	}
}
