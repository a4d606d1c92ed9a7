// Package server wires one Portcullis gateway: it opens NATS (an embedded
// JetStream server in the data directory, or an existing cluster), the
// ledger Log, the Pebble views and their projector, and serves the Connect
// API on one listener (HTTP/1.1 and h2c). cmd/portcullis only parses flags
// and calls it; end-to-end tests start gateways through it too.
package server

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/otelconnect"
	"github.com/oklog/ulid/v2"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/auth"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/fingerprint"
	"github.com/portcullis-dev/portcullis/gateway"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
	"github.com/portcullis-dev/portcullis/telemetry"
	"github.com/portcullis-dev/portcullis/toolcall"
	"github.com/portcullis-dev/portcullis/trust"
	"go.opentelemetry.io/otel/trace"
)

// Limits of the API listener.
const (
	MaxRequestBytes   = 1 << 20 // one Connect request
	readHeaderTimeout = 10 * time.Second
	shutdownWaitMax   = 15 * time.Second
	drainWaitMax      = 5 * time.Second
	projectorRestart  = time.Second
	// SweepEvery is how often every gateway expires DISPATCHED executions
	// past their dispatch deadline (ledger.Service.SweepOverdue).
	SweepEvery = 2 * time.Second
)

// Options configure a gateway; cmd/portcullis fills them from flags.
type Options struct {
	DataDir    string
	Listen     string // HOST:PORT of the API ("127.0.0.1:0" picks a port)
	ConfigPath string
	// NatsURL joins an existing NATS/JetStream instead of embedding one
	// (comma-separated seed URLs); see nats.go for the NATS options below.
	NatsURL        string
	NatsCreds      string // credential file: nkey seed or user .creds (default: the role's file in DataDir/nats)
	NatsTLSCA      string
	NatsTLSCert    string
	NatsTLSKey     string
	NatsMonitorURL string // servers' monitoring URLs, to check they fsync every write
	// NatsListen is the embedded server's client address, so other
	// gateways can join with --nats-url ("127.0.0.1:-1" picks a port).
	NatsListen string
	// Replicas of the streams; 0 picks 1 on a single server, 3 on a cluster.
	Replicas int
	// FingerprintKey in hex; empty reads DataDir/fingerprint.key, else adopts
	// the key the ledger shares, else creates one.
	FingerprintKey string
	// NoShareKey keeps the fingerprint key out of the ledger's meta stream.
	NoShareKey bool
	// UnsafeNoFsync lets the embedded server sync every 2 minutes instead of
	// on every write. Acknowledged writes can be lost on power loss.
	UnsafeNoFsync bool
	// BatchStaging is where the embedded server stages the execution
	// streams' atomic batches: StagingMemory (the default) or StagingDisk
	// (staging.go).
	BatchStaging string
	GatewayID    string
	Logger       *slog.Logger
	// Now is the ledger's clock (tests move it past match windows).
	Now func() time.Time
	// CheckpointEvery is how often the gateway seals signed checkpoints
	// over the streams (0: DefaultCheckpointEvery); it also seals on shutdown.
	CheckpointEvery time.Duration
	// OTLPEndpoint exports traces over OTLP/HTTP (a URL); empty: the
	// OTEL_EXPORTER_OTLP_* environment, else tracing is off.
	OTLPEndpoint string
	// StuckAfter is how long a projector may stay behind without catching
	// up before readiness fails (0: telemetry.DefaultStuckAfter).
	StuckAfter time.Duration
	// TLSCert and TLSKey serve the API over TLS; ClientCA (PEM) verifies
	// client certificates, which callers.X.cert_sha256 maps to callers.
	TLSCert, TLSKey, ClientCA string
	// NoSweep stops this gateway from expiring overdue dispatches itself
	// (tests that drive the console's "mark outcome unknown" by hand); other
	// gateways of the ledger still sweep.
	NoSweep bool
	// NoBudgetLead: this gateway decides every budget command itself and
	// never leads or forwards (the racing compare-and-set of before, for
	// tests and A/B measurements).
	NoBudgetLead bool
	// RootKey references the ledger's root private key ("env:NAME",
	// "file:PATH" or a path): with it the gateway enrolls itself. Empty:
	// DATA_DIR/root.key when present; a new ledger creates it there.
	RootKey string
	// RootPublicKey pins the ledger's root (hex); empty pins the root the
	// gateway sees first (DATA_DIR/root.pub).
	RootPublicKey string
	// SigningKey references this gateway's Ed25519 key; empty:
	// DATA_DIR/gateway.ed25519 (created on first start, 0600).
	SigningKey string
	// MCPSessionIdle closes a stateful (2025-11-25) MCP session after this
	// long without a request (0: DefaultMCPSessionIdle; negative: never).
	MCPSessionIdle time.Duration
	// SessionOwnerTTL is how long a session owner record stays in META
	// (0: DefaultSessionOwnerTTL; negative: for good, as before).
	SessionOwnerTTL time.Duration
	// ExecShards is how many execution lanes (streams, each with its own
	// committer) a NEW ledger spreads its executions over (0:
	// DefaultExecShards). The count is recorded in the ledger's root; a
	// gateway of an existing ledger uses the recorded count and refuses a
	// different non-zero ExecShards.
	ExecShards int
}

// Gateway is a running gateway.
type Gateway struct {
	Addr    string // the API's listen address
	NatsURL string // where other gateways can join this ledger
	ID      string

	Ledger *ledger.Service
	Keeper *keeper.Keeper
	// ExecutionsLog is the ledger's Log of executions (tests build a second
	// Service on it to simulate a gateway that crashed mid-decision).
	ExecutionsLog ledger.Log
	// ExecutionLanes are the lanes a Service of this ledger decides over
	// (ledger.Config.Lanes; nil: one lane, ExecutionsLog).
	ExecutionLanes []ledger.Lane
	Contracts      map[string]contract.Contract
	Key            fingerprint.Key
	Projector      *projector.Projector // lane 0's
	// Lanes is the ledger's execution lane count (from its root);
	// LaneProjectors[k] folds lane k (LaneProjectors[0] is Projector).
	Lanes          ledger.Lanes
	LaneProjectors []*projector.Projector
	Budget         *projector.Projector
	Sessions       *projector.Projector
	Views          *pebbleviews.Views
	// Checkpoints and Enrollments fold nothing: they quarantine forged or
	// garbage checkpoints (PORTCULLIS_AUDIT) and enrollment records
	// (PORTCULLIS_META) into the quarantine view (trustviews.go).
	Checkpoints *projector.Projector
	Enrollments *projector.Projector
	// Metrics is this gateway's registry, served on /metrics; its methods
	// are the hooks other parts feed (Quarantined, SetOverdueDispatches).
	Metrics *telemetry.Metrics
	// Readiness serves /readyz and grpc.health.v1.
	Readiness *telemetry.Readiness
	// Auth authenticates API callers (the config's callers:); other routes
	// of the listener use it through auth.Middleware.
	Auth *auth.Authenticator
	// Keyring holds the enrolled gateways every event is checked against.
	Keyring *trust.Keyring
	// SignKey is this gateway's enrolled signing key (tests build a second
	// Service with it; an unsigned or unenrolled writer is quarantined).
	SignKey ed25519.PrivateKey
	// RootKeyPath is the root key file this gateway created or was given
	// ("" when it runs without the root key).
	RootKeyPath string

	log       *slog.Logger
	tracer    trace.TracerProvider
	traceDown func(context.Context) error
	http      *http.Server
	nats      *natsConn
	jsLog     *ljs.Log
	laneLogs  []*ljs.Log // lane k's log; laneLogs[0] is jsLog
	budLog    *ljs.Log
	audLog    *ljs.Log
	sesLog    *ljs.Log
	feeds     map[string]*ljs.Feed // by stream: what its committer hands its projector
	staging   string               // Options.BatchStaging
	sealer    *sealer
	replicas  *replicaWatch // nil without --nats-monitor-url
	mcp       *mcp.Gateway
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeMu   sync.Once
}

// Start opens everything and serves until Close.
func Start(ctx context.Context, o Options) (*Gateway, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// Everything that can be checked is checked before anything is written.
	if err := o.validate(); err != nil {
		return nil, err
	}
	cfg := &config.Config{Tools: map[string]config.Tool{}}
	if o.ConfigPath != "" {
		var err error
		if cfg, err = config.Load(o.ConfigPath); err != nil {
			return nil, err
		}
	} else {
		lg.Warn("no --config: this gateway knows zero tools, so every tools/call and Begin is refused")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	id, err := gatewayID(o, cfg)
	if err != nil {
		return nil, err
	}
	authn, err := newAuthenticator(cfg, o, lg)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := serverTLS(o)
	if err != nil {
		return nil, err
	}
	g := &Gateway{ID: id, log: lg.With("gateway", id), Auth: authn, Metrics: telemetry.NewMetrics()}
	ok := false
	defer func() {
		if !ok {
			g.Close(context.Background())
		}
	}()
	if g.nats, err = openNATS(o, g.log); err != nil {
		return nil, err
	}
	g.NatsURL = g.nats.url
	if g.tracer, g.traceDown, err = telemetry.Tracing(ctx, o.OTLPEndpoint, id, telemetry.Version()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", o.Listen, err)
	}
	defer func() {
		if !ok {
			ln.Close()
		}
	}()
	g.Addr = ln.Addr().String()
	ln = mcp.TrackArrivals(ln) // under TLS: when each request's bytes arrived (delivery evidence, mcp/arrival.go)
	scheme := "http://"
	if tlsCfg != nil {
		ln, scheme = tls.NewListener(ln, tlsCfg), "https://"
	}
	if !gatewayIDPattern.MatchString(id) {
		return nil, fmt.Errorf("gateway id %q: want 1-64 of A-Z a-z 0-9 _ -", id)
	}
	replicas := g.nats.replicas(o)
	if err := g.nats.ensureStreams(ctx, replicas, g.log); err != nil {
		return nil, err
	}
	var ident *identity
	err = ljs.Retry(ctx, g.log, "ledger identity", func(ctx context.Context) (err error) {
		ident, err = openIdentity(ctx, g.nats.js, o, g.log)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The meta stream may be electing a leader (a gateway restarted while
	// a NATS node comes back): its writes get no answer until then, so
	// these steps are retried like the streams' setup. Each is safe to
	// run again (its records are first write wins, or new records).
	err = ljs.Retry(ctx, g.log, "enrollment", func(ctx context.Context) error {
		return ensureEnrolled(ctx, g.nats.js, ident, id, scheme+g.Addr, g.log)
	})
	if err != nil {
		return nil, err
	}
	g.Keyring = ident.keyring
	if ident.rootKey != nil {
		g.RootKeyPath = o.RootKey
		if g.RootKeyPath == "" {
			g.RootKeyPath = filepath.Join(o.DataDir, RootKeyFile)
		}
	}
	var key fingerprint.Key
	err = ljs.Retry(ctx, g.log, "fingerprint key", func(ctx context.Context) (err error) {
		key, err = resolveKey(ctx, g.nats.js, o, ident, id, g.log)
		return err
	})
	if err != nil {
		return nil, err
	}
	signKey := ident.signKey
	g.SignKey = signKey
	g.Lanes = rootLanes(ident.root)
	if err := checkLanes(o, g.Lanes); err != nil {
		return nil, err
	}
	if err := g.nats.ensureLanes(ctx, replicas, g.Lanes, g.log); err != nil {
		return nil, err
	}
	// The lanes' atomic batches are staged in memory (staging.go).
	g.staging = o.BatchStaging
	for k := range g.Lanes.Count() {
		g.StageInMemory(ledger.LaneStream(k))
	}
	signer := ljs.NewGroupSigner(signKey) // one for every lane: groups signed at once share a signature
	// Each lane's projector, the budget's and the sessions' fold this
	// gateway's writes from its feed and read the stream only for the rest
	// (ljs.Source).
	feeds := make(map[string]*ljs.Feed, g.Lanes.Count()+2)
	g.feeds = feeds
	for k := range g.Lanes.Count() {
		feeds[ledger.LaneStream(k)] = ljs.NewFeed()
	}
	feeds[keeper.Stream], feeds[mcp.SessionsStream] = ljs.NewFeed(), ljs.NewFeed()
	g.jsLog, err = ljs.Open(ctx, g.nats.conn, ljs.StreamSpec{Name: ledger.ExecutionsStream, Description: streamDescriptions[ledger.ExecutionsStream], Subjects: ledger.ExecutionsSubjects, Replicas: replicas}, ljs.Options{Logger: g.log, Keys: g.Keyring, OnCommit: g.Metrics.OnCommit(ledger.ExecutionsStream), GroupSigner: signer, Feed: feeds[ledger.ExecutionsStream]})
	if err != nil {
		return nil, err
	}
	g.laneLogs = []*ljs.Log{g.jsLog}
	for k := 1; k < g.Lanes.Count(); k++ {
		name := ledger.LaneStream(k)
		l, err := ljs.Open(ctx, g.nats.conn, laneSpec(k, replicas), ljs.Options{Logger: g.log, Keys: g.Keyring, OnCommit: g.Metrics.OnCommit(name), GroupSigner: signer, Feed: feeds[name]})
		if err != nil {
			return nil, err
		}
		g.laneLogs = append(g.laneLogs, l)
	}
	g.budLog, err = ljs.Open(ctx, g.nats.conn, ljs.StreamSpec{Name: keeper.Stream, Description: streamDescriptions[keeper.Stream], Subjects: keeper.Subjects, Replicas: replicas}, ljs.Options{Logger: g.log, Keys: g.Keyring, OnCommit: g.Metrics.OnCommit(keeper.Stream), Feed: feeds[keeper.Stream]})
	if err != nil {
		return nil, err
	}
	g.audLog, err = ljs.Open(ctx, g.nats.conn, ljs.StreamSpec{Name: AuditStream, Description: streamDescriptions[AuditStream], Subjects: []string{checkpointSubjectPfx + "*"}, Replicas: replicas}, ljs.Options{Logger: g.log, Keys: g.Keyring, OnCommit: g.Metrics.OnCommit(AuditStream)})
	if err != nil {
		return nil, err
	}
	if g.Views, err = pebbleviews.Open(filepath.Join(o.DataDir, "views")); err != nil {
		return nil, err
	}
	g.Views.OnBehind(func(stream string, seq uint64) {
		if f := feeds[stream]; f != nil {
			f.Want(seq)
		}
	})
	g.Views.ReadBudgetFrom(g.budLog.At)
	for k, l := range g.laneLogs {
		name := ledger.LaneStream(k)
		p := projector.New(name, ljs.Source{Stream: l.Stream(), Feed: feeds[name]}, g.Views, g.log)
		p.SetLane(k, g.Lanes)
		p.SetKeys(g.Keyring)
		p.OnQuarantine(g.quarantined)
		g.LaneProjectors = append(g.LaneProjectors, p)
	}
	g.Projector = g.LaneProjectors[0]
	g.Budget = projector.NewBudget(ljs.Source{Stream: g.budLog.Stream(), Feed: feeds[keeper.Stream]}, g.Views, g.log)
	g.Budget.SetKeys(g.Keyring)
	g.Budget.OnQuarantine(g.quarantined)
	g.Keeper = keeper.New(g.Metrics.Log(keeper.Stream, g.budLog), g.Views, id, o.Now)
	g.Keeper.SignKey = signKey
	g.ExecutionsLog, g.Contracts, g.Key = g.jsLog, cfg.Contracts(), key
	var lanes []ledger.Lane
	if g.Lanes.Count() > 1 {
		for k, l := range g.laneLogs {
			name := ledger.LaneStream(k)
			lanes = append(lanes, ledger.Lane{Log: g.Metrics.Log(name, l), WaitFor: func(ctx context.Context, seq uint64) error {
				return g.Views.StreamWaitFor(ctx, name, seq)
			}})
		}
		g.ExecutionLanes = lanes
	}
	g.Ledger = ledger.NewService(ledger.Config{Log: g.Metrics.Log(ledger.ExecutionsStream, g.jsLog), Views: g.Views, Key: key, Contracts: cfg.Contracts(), GatewayID: id, Now: o.Now,
		Budget: keeper.Binding{Keeper: g.Keeper}, OnBegin: g.Metrics.OnBegin, Lanes: lanes}) // the executions logs sign their commit groups (GroupSignKey)
	g.watch(o)

	// Stored response-stream events carry a MAC under a key derived from
	// the fingerprint key, which every gateway of the ledger holds and the
	// NATS credentials do not open; one without a valid MAC is never served
	// and is counted with the quarantined events.
	events, err := mcp.OpenEventStore(ctx, g.nats.js, replicas, mcp.StreamsKey(key), g.log)
	if err != nil {
		return nil, err
	}
	events.OnReject(func(reason string) { g.Metrics.Quarantined(mcp.StreamsStream, reason) })
	g.sesLog, err = ljs.Open(ctx, g.nats.conn, ljs.StreamSpec{Name: mcp.SessionsStream, Description: streamDescriptions[mcp.SessionsStream], Subjects: mcp.SessionsSubjects, Replicas: replicas}, ljs.Options{Logger: g.log, Keys: g.Keyring, OnCommit: g.Metrics.OnCommit(mcp.SessionsStream), Feed: feeds[mcp.SessionsStream]})
	if err != nil {
		return nil, err
	}
	g.Sessions = projector.NewJournal(mcp.SessionsStream, ljs.Source{Stream: g.sesLog.Stream(), Feed: feeds[mcp.SessionsStream]}, g.Views, g.log)
	g.Sessions.SetKeys(g.Keyring)
	g.Sessions.OnQuarantine(g.quarantined)
	meta, err := ensureMeta(ctx, g.nats.js)
	if err != nil {
		return nil, err
	}
	g.Checkpoints, g.Enrollments = trustProjectors(g.audLog.Stream(), meta, g.Views, g.Keyring, g.Keyring.Root(), g.log)
	g.Checkpoints.OnQuarantine(g.quarantined)
	g.Enrollments.OnQuarantine(g.quarantined)

	g.sealer = &sealer{log: g.audLog, key: signKey, id: id, streams: sealedStreams(g.Lanes), sealed: map[string]uint64{}, marks: func(stream string) (uint64, []byte, error) {
		m, err := g.Views.Mark(stream)
		return m.Seq, m.Digest, err
	}, folded: func(ctx context.Context, seq uint64) error { return g.Views.StreamWaitFor(ctx, AuditStream, seq) }, link: g.Views.Link}
	runCtx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.wg.Add(6 + len(g.LaneProjectors))
	for _, p := range g.LaneProjectors {
		go g.runProjector(runCtx, p)
	}
	go g.runProjector(runCtx, g.Budget)
	go g.runProjector(runCtx, g.Sessions)
	go g.runProjector(runCtx, g.Checkpoints)
	go g.runProjector(runCtx, g.Enrollments)
	go g.runSealer(runCtx, o.CheckpointEvery)
	go g.runSweep(runCtx, o.NoSweep)
	if g.replicas != nil {
		g.wg.Add(1)
		go func() { defer g.wg.Done(); g.replicas.run(runCtx) }()
	}
	if err := g.leadBudget(runCtx, id, o.NoBudgetLead); err != nil {
		return nil, err
	}

	journal := &mcp.Journal{Log: g.sesLog, Key: signKey, GatewayID: id, Logger: g.log}
	mg, err := mcp.New(g.Ledger, cfg, events, journal, g.log)
	if err != nil {
		return nil, err
	}
	g.mcp = mg
	mg.SessionIdle = orDefault(o.MCPSessionIdle, DefaultMCPSessionIdle)
	mg.SetOwners(&sessionOwners{js: g.nats.js, id: id, keyring: g.Keyring, log: g.log, ttl: orDefault(o.SessionOwnerTTL, DefaultSessionOwnerTTL)}, scheme+g.Addr)
	binder, err := toolcall.New(cfg.Tools)
	if err != nil {
		return nil, err
	}
	if g.http, err = newHTTPServer(g, mg, cfg, o, binder, auth.NewInterceptor(authn, auth.Policy{ExecutionActor: g.executionActor}, g.log)); err != nil {
		return nil, err
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("serve", "err", err)
		}
	}()
	ok = true
	g.log.Info("portcullis serving", "listen", g.Addr, "nats", g.NatsURL, "tools", len(cfg.Tools), "config", o.ConfigPath)
	return g, nil
}

// CompressMinBytes is the smallest Connect response the gateway gzips for
// a caller that accepts it. Connect's default (0) gzips every response:
// for a Begin's answer of about half a kilobyte that cost a compressor's
// reset and the caller's decompression, 0.1-0.2 ms of CPU per call, to
// save a few hundred bytes (docs/performance.md, "Connect responses
// uncompressed below 8 KiB"). Lists of executions and holds are larger and
// still go compressed.
const CompressMinBytes = 8 << 10

func newHTTPServer(g *Gateway, mg *mcp.Gateway, cfg *config.Config, o Options, binder *toolcall.Binder, authz connect.Interceptor) (*http.Server, error) {
	mux := http.NewServeMux()
	known := func(tool string) bool { _, ok := cfg.Tools[tool]; return ok }
	mux.Handle("/mcp", g.Metrics.MCP(mg.Handler(), g.tracer, known))
	// /metrics answers anyone, as the probes do (counts, lag, latencies);
	// the budget accounts' names and money only to the callers the Connect
	// API shows them to (GetAccount's roles; docs/operating.md).
	accountReaders := auth.RolesFor(portcullisv1connect.BudgetServiceGetAccountProcedure)
	mux.Handle("/metrics", auth.Optional(g.Auth, g.log, g.Metrics.Handler(func(r *http.Request) bool {
		return slices.ContainsFunc(accountReaders, auth.FromContext(r.Context()).Has)
	})))
	mux.Handle("/healthz", telemetry.Live())
	mux.Handle("/readyz", g.Readiness.Ready())
	traces, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(g.tracer), otelconnect.WithoutMetrics())
	if err != nil {
		return nil, fmt.Errorf("otelconnect: %w", err)
	}
	// Every Connect service goes through the caller check (after the trace
	// span opens); health, reflection and the probes stay open, /metrics
	// shows the budget accounts only to their readers (above).
	// The console calls the same services in process with the signed-in
	// caller in the context.
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(MaxRequestBytes), connect.WithCompressMinBytes(CompressMinBytes), gateway.StrictJSON(), connect.WithInterceptors(traces, authz)}
	executions := &gateway.ExecutionService{Ledger: g.Ledger, Tools: binder}
	budgets := &gateway.BudgetService{Keeper: g.Keeper, Decisions: g.Views}
	approvals := &gateway.ApprovalService{Ledger: g.Ledger, OnApproved: mg.Approved}
	mux.Handle(portcullisv1connect.NewExecutionServiceHandler(executions, opts...))
	mux.Handle(portcullisv1connect.NewBudgetServiceHandler(budgets, opts...))
	mux.Handle(portcullisv1connect.NewApprovalServiceHandler(approvals, opts...))
	consoleHandler, err := g.newConsole(cfg, o, executions, approvals, budgets)
	if err != nil {
		return nil, err
	}
	mux.Handle("/console/", consoleHandler)
	mux.Handle(portcullisv1connect.NewAuditServiceHandler(&gateway.AuditService{
		Read: func(ctx context.Context, id, fp string) (string, []audit.Stored, error) {
			return readIntent(ctx, g.laneStreams(), g.sesLog.Stream(), g.Keyring, id, fp)
		}, Quarantine: g.Views}, opts...))
	services := []string{portcullisv1connect.ExecutionServiceName, portcullisv1connect.BudgetServiceName,
		portcullisv1connect.ApprovalServiceName, portcullisv1connect.AuditServiceName}
	g.Readiness.Services = services
	mux.Handle(grpchealth.NewHandler(g.Readiness))
	reflector := grpcreflect.NewStaticReflector(services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{Handler: mux, Protocols: p, ReadHeaderTimeout: readHeaderTimeout,
		ConnContext: mcp.ConnContext(auth.ConnContext), ConnState: mcp.ConnState,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}, nil
}

// executionActor is the actor of a recorded execution, for the policy that
// keeps an executor to the actors it acts for.
func (g *Gateway) executionActor(ctx context.Context, id string) (string, error) {
	x, err := g.Ledger.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return x.GetActor(), nil
}

// runProjector keeps the views folding; after a failure it starts again
// from the checkpoint.
func (g *Gateway) runProjector(ctx context.Context, p *projector.Projector) {
	defer g.wg.Done()
	for {
		err := p.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		g.log.Error("projector stopped; replaying from its checkpoint", "err", err)
		select {
		case <-time.After(projectorRestart):
		case <-ctx.Done():
			return
		}
	}
}

// drainViews lets the projectors fold what the streams hold before they
// stop (bounded), so the views a stopped gateway leaves are complete.
func (g *Gateway) drainViews() {
	if g.Views == nil || g.jsLog == nil || g.budLog == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainWaitMax)
	defer cancel()
	for k, l := range g.laneLogs {
		if seq, err := l.LastSeq(ctx); err == nil {
			_ = g.Views.StreamWaitFor(ctx, ledger.LaneStream(k), seq)
		}
	}
	if seq, err := g.budLog.LastSeq(ctx); err == nil {
		_ = g.Views.BudgetWaitFor(ctx, seq)
	}
	if g.sesLog != nil {
		if seq, err := g.sesLog.LastSeq(ctx); err == nil {
			_ = g.Views.StreamWaitFor(ctx, mcp.SessionsStream, seq)
		}
	}
}

// runSealer seals checkpoints periodically until ctx ends.
func (g *Gateway) runSealer(ctx context.Context, every time.Duration) {
	defer g.wg.Done()
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := g.sealer.seal(ctx); err != nil {
				g.log.Warn("checkpoint", "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// runSweep expires overdue dispatches every SweepEvery until ctx ends, so
// a dispatch whose gateway died is recorded OUTCOME_UNKNOWN by a living one.
func (g *Gateway) runSweep(ctx context.Context, off bool) {
	defer g.wg.Done()
	if off {
		return
	}
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n, err := g.Ledger.SweepOverdue(ctx)
			if err != nil && ctx.Err() == nil {
				g.log.Warn("deadline sweep", "err", err)
			}
			if g.Metrics != nil {
				g.Metrics.SetOverdueDispatches(n)
			}
			if n > 0 {
				g.log.Info("deadline sweep: recorded outcome unknown", "executions", n)
			}
		case <-ctx.Done():
			return
		}
	}
}

// Quarantined counts the messages this gateway's projectors refused to
// fold since it started, over all streams (for an operator metric; the
// quarantine view, ListQuarantine, holds each one).
func (g *Gateway) Quarantined() uint64 {
	n := g.Budget.Quarantined() + g.Sessions.Quarantined() + g.Checkpoints.Quarantined() + g.Enrollments.Quarantined()
	for _, p := range g.LaneProjectors {
		n += p.Quarantined()
	}
	return n
}

// Seal appends checkpoints now for every stream that moved.
func (g *Gateway) Seal(ctx context.Context) error { return g.sealer.seal(ctx) }

// Close shuts down gracefully: stop taking requests, let those in flight
// finish, stop the projector, close the views and NATS.
func (g *Gateway) Close(ctx context.Context) {
	g.closeMu.Do(func() {
		if g.http != nil {
			sctx, cancel := context.WithTimeout(ctx, shutdownWaitMax)
			_ = g.http.Shutdown(sctx)
			cancel()
		}
		if g.mcp != nil {
			g.mcp.Close()
		}
		g.drainViews()
		if g.cancel != nil {
			g.cancel()
		}
		g.wg.Wait()
		if g.sealer != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = g.sealer.seal(sctx) // a last checkpoint over what the views hold
			if g.Checkpoints != nil {
				// The checkpoints' projector has stopped: fold that last
				// checkpoint too, so the views a shutdown leaves are the
				// views a rebuild makes.
				if err := g.Checkpoints.CatchUp(sctx, nil); err != nil {
					g.log.Warn("fold the last checkpoint", "err", err)
				}
			}
			cancel()
		}
		if g.jsLog != nil {
			g.jsLog.Close()
		}
		for _, l := range g.laneLogs[min(1, len(g.laneLogs)):] { // lanes ≥ 1 (lane 0 is jsLog)
			l.Close()
		}
		if g.budLog != nil {
			g.budLog.Close()
		}
		if g.audLog != nil {
			g.audLog.Close()
		}
		if g.sesLog != nil {
			g.sesLog.Close()
		}
		if g.Views != nil {
			_ = g.Views.Close()
		}
		if g.nats != nil {
			g.nats.close()
		}
		if g.traceDown != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = g.traceDown(sctx)
			cancel()
		}
	})
}

// gatewayID is the flag, else the config's gateway.id, else an id made once
// and kept in the data directory.
func gatewayID(o Options, cfg *config.Config) (string, error) {
	if o.GatewayID != "" {
		return o.GatewayID, nil
	}
	if cfg.GatewayID != "" {
		return cfg.GatewayID, nil
	}
	p := filepath.Join(o.DataDir, "gateway.id")
	if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
		return string(b), nil
	}
	id := "gw_" + ulid.Make().String()
	if err := os.WriteFile(p, []byte(id), 0o600); err != nil {
		return "", fmt.Errorf("gateway id: %w", err)
	}
	return id, nil
}

// Run serves until ctx ends (SIGTERM in cmd/portcullis), then shuts down.
func Run(ctx context.Context, o Options) error {
	g, err := Start(ctx, o)
	if err != nil {
		return err
	}
	<-ctx.Done()
	g.log.Info("shutting down")
	g.Close(context.Background())
	return nil
}
