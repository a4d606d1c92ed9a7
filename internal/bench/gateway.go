package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/portcullis-dev/portcullis/fingerprint"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// benchKey is the fingerprint key of every benchmark gateway (hex).
var benchKey = hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

const agentToken = "bench-agent-token"

// ledgerConfig: the contracts the Begin and Reserve workloads use.
const ledgerConfig = `
gateway:
  id: gw-bench
tools:
  create_payment:
    retry: idempotency_key
    match_window: 10m
    timeout: 10m
`

// mcpConfig: one bound tool on the local target, for tools/call.
func mcpConfig(targetURL string) string {
	sum := sha256.Sum256([]byte(agentToken))
	return fmt.Sprintf(`
gateway:
  id: gw-bench
agents:
  agent-7: {token_sha256: %s}
tools:
  deploy_release:
    description: Deploy a release
    channel: http
    method: POST
    target: %[2]s/releases
    status_url: %[2]s/status/{execution_id}
    timeout: 5s
    input_schema: {type: object, properties: {release_id: {type: string}}, required: [release_id]}
    retry: status_query
    match_window: 1h
`, hex.EncodeToString(sum[:]), targetURL)
}

// gw is a running gateway with its own temp dir.
type gw struct {
	*server.Gateway
	dir string
}

func (g *gw) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g.Close(ctx)
	_ = os.RemoveAll(g.dir)
	// A gateway of several shards raised the processors
	// (server.RaiseProcsForFsync): the next cell starts as a fresh process would.
	runtime.GOMAXPROCS(server.StartProcs)
}

// connect is a connection to g's embedded NATS server as role.
func (g *gw) connect(role natsauth.Role) (*nats.Conn, error) {
	auth, err := natsauth.ClientOption(g.CredsFile(role))
	if err != nil {
		return nil, err
	}
	return nats.Connect(g.NatsURL, auth, natsauth.Inbox(role))
}

// execShards is the execution shard count of every benchmark ledger
// (-exec-shards; 0: a new ledger's default).
var execShards int

// startGW starts a gateway with an embedded NATS (join == nil) or one
// joined to join's ledger.
func startGW(ctx context.Context, config string, join *gw, id string) (*gw, error) {
	return startGWShards(ctx, config, join, id, execShards)
}

// startGWShards is startGW on a new ledger of the given execution shards.
func startGWShards(ctx context.Context, config string, join *gw, id string, shards int) (*gw, error) {
	dir, err := os.MkdirTemp("", "pcbench-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	o := server.Options{
		DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", ConfigPath: cfg, FingerprintKey: benchKey,
		NatsListen: "127.0.0.1:-1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ExecShards: shards,
	}
	if join != nil {
		o.NatsListen = ""
		o.NatsURL = join.NatsURL
		o.NatsCreds = join.CredsFile(natsauth.Gateway)
		o.RootKey = join.RootKeyPath
		o.GatewayID = id
	}
	g, err := server.Start(ctx, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	return &gw{Gateway: g, dir: dir}, nil
}

func httpClient() *http.Client { return benchkit.HTTPClient() }

func benchAction(i int, run string) fingerprint.Action {
	return fingerprint.Action{
		Actor: "agent-7", Tool: "create_payment", Channel: "http", Target: "payments.example.com/v1/charges",
		Method: "POST", IntentScope: run,
		Arguments: []byte(`{"amount":` + strconv.Itoa(1000+i) + `,"currency":"GBP","customer":"cus_4711","description":"order ` + strconv.Itoa(i) + `"}`),
	}
}
