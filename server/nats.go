package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
)

const (
	natsReadyWaitMax = 30 * time.Second
	// defaultNATSPort is where the embedded server listens unless told
	// otherwise (or the port is taken), so a second gateway joins with
	// --nats-url nats://127.0.0.1:4222.
	defaultNATSPort = 4222
)

// Connection liveness and failover. A hung server is noticed after
// NatsPingInterval × (NatsMaxPingsOut+1) ≈ 6 s (the client default is 2
// minutes per ping); the client then tries the other seed URLs and the
// servers the cluster announced, NatsReconnectWait apart plus up to
// NatsReconnectJitter (NatsReconnectJitterTLS with TLS), forever.
const (
	NatsPingInterval        = 2 * time.Second
	NatsMaxPingsOut         = 2
	NatsReconnectWait       = 250 * time.Millisecond
	NatsReconnectJitter     = 250 * time.Millisecond
	NatsReconnectJitterTLS  = time.Second
	natsConnectWait         = 2 * time.Second // one dial of one URL
	natsReconnectBufferSize = 8 << 20         // bytes published while reconnecting
	monitorWaitMax          = 5 * time.Second // reading a server's /varz
)

// natsConn is the connection to the ledger's NATS, and the embedded server
// when there is one.
type natsConn struct {
	server   *natsserver.Server
	conn     *nats.Conn
	js       jetstream.JetStream
	url      string
	credsDir string // the data dir holding the embedded server's credentials
	role     natsauth.Role
	unlock   func() // releases the data directory's lock (embedded server only)
}

// NATSStreams names every stream of the ledger and the one finance reads,
// for the users' permissions (the gateway and analyst read any stream of
// the account; a new stream goes here and into streamConfigs). The
// execution lanes' streams PORTCULLIS_EXECUTIONS_<k> stand here as lane 1.
func NATSStreams() natsauth.Streams {
	return natsauth.Streams{
		All:    []string{ledger.ExecutionsStream, ledger.LaneStream(1), keeper.Stream, AuditStream, mcp.SessionsStream, mcp.StreamsStream, metaStream, budgetLeaseStream},
		Budget: keeper.Stream,
	}
}

// openNATS starts the embedded JetStream server in DIR/jetstream (fsync on
// every write unless relaxed) or connects to o.NatsURL (comma-separated
// seed URLs), as the gateway user. The embedded server requires
// authentication: its users' nkeys are in DIR/nats (made on first start,
// see natsauth).
func openNATS(o Options, lg *slog.Logger) (*natsConn, error) {
	return openNATSAs(o, lg, natsauth.Gateway)
}

// openNATSAs opens the ledger's NATS as role (see openNATS).
func openNATSAs(o Options, lg *slog.Logger, role natsauth.Role) (*natsConn, error) {
	n := &natsConn{role: role}
	if o.NatsURL != "" {
		opts, err := clientOptions(o, lg, role)
		if err != nil {
			return nil, err
		}
		urls := seedURLs(o.NatsURL)
		nc, err := nats.Connect(strings.Join(urls, ","), opts...)
		if errors.Is(err, nats.ErrNoServers) {
			err = fmt.Errorf("%w (%w)", err, dialCause(urls))
		}
		if err != nil {
			return nil, fmt.Errorf("nats %s: %w", strings.Join(urls, ","), err)
		}
		n.conn, n.url = nc, o.NatsURL
		if role == natsauth.Gateway {
			if err := checkSyncAlways(o, nc, lg); err != nil {
				nc.Close()
				return nil, err
			}
		}
	} else {
		if o.DataDir == "" {
			return nil, errors.New("no ledger: give --data-dir (embedded server) or --nats-url")
		}
		if role != natsauth.Gateway && !fileExists(filepath.Join(o.DataDir, "jetstream")) {
			return nil, fmt.Errorf("no ledger in %s (no jetstream directory; give the data dir of a gateway, or --nats-url)", o.DataDir)
		}
		// One embedded server per store: a second one on a live store
		// (an operator command given a running gateway's --data-dir) would
		// write to the gateway's files behind its back.
		release, busy, err := lockDataDir(o.DataDir)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", filepath.Join(o.DataDir, dataLockFile), err)
		}
		if busy {
			return openRunning(o, lg, role)
		}
		started := false
		defer func() {
			if !started {
				release()
			}
		}()
		if err := natsauth.EnsureFiles(o.DataDir); err != nil {
			return nil, err
		}
		users, err := natsauth.Users(o.DataDir, NATSStreams())
		if err != nil {
			return nil, err
		}
		host, port := "127.0.0.1", defaultNATSPort
		if o.NatsListen != "" {
			h, p, err := net.SplitHostPort(o.NatsListen)
			if err != nil {
				return nil, fmt.Errorf("--nats-listen %q: %w", o.NatsListen, err)
			}
			if port, err = strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("--nats-listen %q: bad port", o.NatsListen)
			}
			host = h
		} else if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			lg.Warn("the NATS port is taken; the embedded server listens on a free port instead (see nats.url in the data dir)", "port", port)
			port = -1
		} else {
			ln.Close()
		}
		opts := &natsserver.Options{
			ServerName: "portcullis",
			Host:       host,
			Port:       port,
			JetStream:  true,
			StoreDir:   filepath.Join(o.DataDir, "jetstream"),
			NoSigs:     true,
			MaxPayload: 8 << 20,
			SyncAlways: !o.UnsafeNoFsync,
			Nkeys:      users,
		}
		if o.UnsafeNoFsync {
			lg.Warn("UNSAFE: JetStream fsync on every write is OFF (--unsafe-no-fsync); acknowledged appends can be lost on power loss")
		}
		ns, err := natsserver.NewServer(opts)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
		ns.Start()
		if !ns.ReadyForConnections(natsReadyWaitMax) {
			ns.Shutdown()
			return nil, errors.New("embedded nats: not ready")
		}
		n.server, n.credsDir = ns, o.DataDir
		n.url = ns.ClientURL()
		if role == natsauth.Gateway { // where operator commands and joining gateways find it
			_ = os.WriteFile(filepath.Join(o.DataDir, natsURLFile), []byte(n.url+"\n"), 0o600)
		}
		nc, err := n.connectEmbedded(role, lg)
		if err != nil {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, err
		}
		n.conn, n.unlock, started = nc, release, true
	}
	js, err := jetstream.New(n.conn)
	if err != nil {
		n.close()
		return nil, err
	}
	n.js = js
	return n, nil
}

// natsURLFile in a data directory holds the client URL of the embedded
// server a running gateway started there.
const natsURLFile = "nats.url"

// openRunning opens the NATS of the gateway running on o.DataDir (it holds
// the directory's lock) through the URL it wrote, as role with the role's
// credentials from the data directory: an operator command given a live
// gateway's --data-dir reads through that gateway's server. A second
// gateway on the same directory is refused.
func openRunning(o Options, lg *slog.Logger, role natsauth.Role) (*natsConn, error) {
	if role == natsauth.Gateway {
		return nil, fmt.Errorf("%s is in use: a running gateway holds %s; stop it, or give this one its own --data-dir and join the ledger with --nats-url \"$(cat %s)\"",
			o.DataDir, filepath.Join(o.DataDir, dataLockFile), filepath.Join(o.DataDir, natsURLFile))
	}
	raw, err := os.ReadFile(filepath.Join(o.DataDir, natsURLFile))
	if err != nil {
		return nil, fmt.Errorf("a gateway is running on %s (it holds %s), but its address cannot be read: %w; give --nats-url", o.DataDir, dataLockFile, err)
	}
	o.NatsURL = strings.TrimSpace(string(raw))
	lg.Info("a gateway is running on this data dir; reading the ledger through its NATS server", "url", o.NatsURL)
	return openNATSAs(o, lg, role)
}

// connectEmbedded opens an in-process connection to the embedded server as role.
func (n *natsConn) connectEmbedded(role natsauth.Role, lg *slog.Logger) (*nats.Conn, error) {
	auth, err := natsauth.ClientOption(natsauth.Path(n.credsDir, role))
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(n.url, nats.InProcessServer(n.server), nats.Name("portcullis-"+string(role)), nats.MaxReconnects(-1), auth,
		natsauth.Inbox(role), nats.ErrorHandler(asyncErrorLogger(lg)))
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats as %s: %w", role, err)
	}
	return nc, nil
}

// dialCause says why no seed URL took a connection (nats.go reports only
// that none did): the first URL's dial error.
func dialCause(urls []string) error {
	var errs []error
	for _, raw := range urls {
		host := raw
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			host = u.Host
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, strconv.Itoa(defaultNATSPort))
		}
		c, err := net.DialTimeout("tcp", host, natsConnectWait)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", raw, err))
			continue
		}
		c.Close()
		errs = append(errs, fmt.Errorf("%s: reachable, but not a NATS server that took the connection", raw))
	}
	return errors.Join(errs...)
}

// seedURLs splits --nats-url's comma-separated list.
func seedURLs(s string) []string {
	var out []string
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// clientOptions are the options of a connection to an outside NATS:
// credentials (--nats-creds, else the role's file in the data dir), the
// role's inbox prefix (replies come under _INBOX.<role>., the only inboxes
// the role may subscribe to), TLS, fast failover, and logged disconnects
// and reconnects.
func clientOptions(o Options, lg *slog.Logger, role natsauth.Role) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("portcullis-" + string(role)),
		natsauth.Inbox(role),
		nats.MaxReconnects(-1),
		nats.PingInterval(NatsPingInterval),
		nats.MaxPingsOutstanding(NatsMaxPingsOut),
		nats.ReconnectWait(NatsReconnectWait),
		nats.ReconnectJitter(NatsReconnectJitter, NatsReconnectJitterTLS),
		nats.ReconnectBufSize(natsReconnectBufferSize),
		nats.Timeout(natsConnectWait),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil && nc.IsClosed() {
				return // closed on purpose (a connection used once at start-up): nothing reconnects
			}
			lg.Warn("nats disconnected; reconnecting", "url", nc.ConnectedUrlRedacted(), "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			lg.Warn("nats reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ErrorHandler(asyncErrorLogger(lg)),
	}
	creds := o.NatsCreds
	if creds == "" && o.DataDir != "" && natsauth.Has(o.DataDir, role) {
		creds = natsauth.Path(o.DataDir, role)
	}
	if creds != "" {
		auth, err := natsauth.ClientOption(creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, auth)
	}
	if o.NatsTLSCA != "" {
		opts = append(opts, nats.RootCAs(o.NatsTLSCA))
	}
	if o.NatsTLSCert != "" || o.NatsTLSKey != "" {
		if o.NatsTLSCert == "" || o.NatsTLSKey == "" {
			return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
		}
		opts = append(opts, nats.ClientCert(o.NatsTLSCert, o.NatsTLSKey))
	}
	return opts, nil
}

// asyncErrorLogger logs what the server refused asynchronously, such as a
// permission violation (the refused request itself is never answered).
func asyncErrorLogger(lg *slog.Logger) nats.ErrHandler {
	return func(_ *nats.Conn, _ *nats.Subscription, err error) {
		lg.Warn("nats", "err", err)
	}
}

// replicas is the replica count of every stream: the flag, else 1 on a
// single server and 3 on a cluster.
func (n *natsConn) replicas(o Options) int {
	if o.Replicas > 0 {
		return o.Replicas
	}
	if n.conn.ConnectedClusterName() != "" {
		return 3
	}
	return 1
}

// streamConfigs are every stream of the ledger at the given replica count
// but the MCP response streams' (ensureStreams ensures that one).
func streamConfigs(replicas int) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		ljs.StreamSpec{Name: ledger.ExecutionsStream, Description: streamDescriptions[ledger.ExecutionsStream], Subjects: ledger.ExecutionsSubjects, Replicas: replicas}.Config(),
		ljs.StreamSpec{Name: keeper.Stream, Description: streamDescriptions[keeper.Stream], Subjects: keeper.Subjects, Replicas: replicas}.Config(),
		ljs.StreamSpec{Name: AuditStream, Description: streamDescriptions[AuditStream], Subjects: []string{checkpointSubjectPfx + "*"}, Replicas: replicas}.Config(),
		ljs.StreamSpec{Name: mcp.SessionsStream, Description: streamDescriptions[mcp.SessionsStream], Subjects: mcp.SessionsSubjects, Replicas: replicas}.Config(),
		metaConfig(replicas),
		budgetLeaseConfig(replicas),
	}
}

// ensureStreams creates or updates every stream of the ledger (META
// included) at the ledger's replica count. On the embedded server it does
// so as the admin user; on an outside cluster with the connection's own
// user, which must be admin unless the streams already match (a gateway's
// user may not change streams: run `portcullis streams` as admin first).
// A cluster without a leader yet is waited for (bounded; see ljs.Retry).
func (n *natsConn) ensureStreams(ctx context.Context, replicas int, lg *slog.Logger) error {
	js := n.js
	if n.server != nil && n.role != natsauth.Admin {
		nc, err := n.connectEmbedded(natsauth.Admin, lg)
		if err != nil {
			return err
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return err
		}
	}
	admin := n.admin()
	var streams []jetstream.Stream
	for _, cfg := range streamConfigs(replicas) {
		s, err := ljs.EnsureConfig(ctx, js, cfg, lg)
		if err != nil {
			return err
		}
		streams = append(streams, s)
	}
	if err := allowMetaTTL(ctx, js, admin, lg); err != nil {
		return err
	}
	// The MCP response streams' storage depends on what an earlier
	// version made (mcp.EnsureStreamsStream).
	s, err := mcp.EnsureStreamsStream(ctx, js, replicas, lg)
	if err != nil {
		return err
	}
	return boundConsumers(ctx, js, append(streams, s), admin, lg)
}

// admin reports whether stream changes go through as the admin user: the
// embedded server's own admin connection, or a connection made as admin
// (`portcullis streams`).
func (n *natsConn) admin() bool { return n.server != nil || n.role == natsauth.Admin }

// boundConsumers gives streams made before the ledger's streams ended
// idle consumers (ljs.ConsumerLimits) that idle limit, by an update that
// changes nothing else of the stream. It applies to consumers created
// from then on: a reader's durable consumer made before stays until it is
// deleted. Only the admin user may change a stream: a gateway on a
// cluster names the streams and what to run, and goes on.
func boundConsumers(ctx context.Context, js jetstream.JetStream, streams []jetstream.Stream, admin bool, lg *slog.Logger) error {
	var old []string
	for _, s := range streams {
		name := s.CachedInfo().Config.Name
		if ljs.BoundsConsumers(s.CachedInfo().Config) {
			continue
		}
		if !admin {
			old = append(old, name)
			continue
		}
		err := ljs.Retry(ctx, lg, "stream "+name, func(ctx context.Context) error {
			info, err := s.Info(ctx) // as it is now: another setting may have changed since
			if err != nil {
				return err
			}
			cfg := info.Config
			cfg.ConsumerLimits.InactiveThreshold = ljs.ConsumerIdleMax // an operator's max_ack_pending limit stays
			_, err = js.UpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("limit the idle time of %s's consumers: %w", name, err)
		}
	}
	if len(old) > 0 {
		lg.Warn("streams made by an earlier version keep idle consumers (a reader's durable consumer included) for good; run `portcullis streams` as the NATS admin", "streams", old, "idle_max", ljs.ConsumerIdleMax)
	}
	return nil
}

// EnsureStreams creates or updates every stream of the ledger on
// o.NatsURL with o's credentials (the admin user's), for `portcullis
// streams`; it reports the replica count used.
func EnsureStreams(ctx context.Context, o Options) (int, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	n, err := openNATSAs(o, lg, natsauth.Admin)
	if err != nil {
		return 0, err
	}
	defer n.close()
	r := n.replicas(o)
	if err := n.ensureStreams(ctx, r, lg); err != nil {
		return r, err
	}
	// The lanes: the ledger's recorded count, else (no ledger yet) the
	// count its first gateway will record (the same --exec-shards).
	// Right after META was made its leader may not answer yet: retried.
	var lanes ledger.Lanes
	err = ljs.Retry(ctx, lg, "ledger root", func(ctx context.Context) error {
		var err error
		lanes, err = ledgerLanes(ctx, n.js)
		return err
	})
	switch {
	case errors.Is(err, ErrNoLedger):
		lanes = newLedgerLanes(o)
	case err != nil:
		return r, err
	default:
		if err := checkLanes(o, lanes); err != nil {
			return r, err
		}
	}
	return r, n.ensureLanes(ctx, r, lanes, lg)
}

// checkSyncAlways refuses a gateway on a cluster that does not fsync every
// write, unless --unsafe-no-fsync. It reads jetstream.config.sync_always
// from the servers' monitoring endpoints (--nats-monitor-url,
// comma-separated, one per server), all at once; without one the setting
// cannot be read through a client connection, and the gateway says so. A
// server whose endpoint does not answer (down, hung, unreachable) is
// named in a warning: a cluster that lost one node must still let its
// gateways restart. One that answers something else, or none answering,
// refuses the start.
func checkSyncAlways(o Options, nc *nats.Conn, lg *slog.Logger) error {
	if o.NatsMonitorURL == "" {
		lg.Warn("cannot check that the NATS servers fsync every write (jetstream sync_interval: always): no --nats-monitor-url given; make sure they do, or acknowledged writes can be lost on power loss",
			"nats", nc.ConnectedUrlRedacted())
		return nil
	}
	urls := seedURLs(o.NatsMonitorURL)
	type reading struct {
		sync   bool
		server string
		err    error
	}
	readings := make([]reading, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			r := &readings[i]
			r.sync, r.server, r.err = readSyncAlways(u)
		})
	}
	wg.Wait()
	read := 0
	for i, u := range urls {
		r := readings[i]
		var unanswered *url.Error
		switch {
		case errors.As(r.err, &unanswered):
			lg.Warn("cannot check that this NATS server fsyncs every write: its monitoring endpoint does not answer (down, hung or unreachable); make sure it does", "monitor", u, "err", r.err)
			continue
		case r.err != nil:
			return fmt.Errorf("nats monitor %s: %w", u, r.err)
		}
		read++
		if r.sync {
			continue
		}
		if o.UnsafeNoFsync {
			lg.Warn("UNSAFE: NATS server does not fsync every write; continuing because of --unsafe-no-fsync", "server", r.server, "monitor", u)
			continue
		}
		return fmt.Errorf("nats server %s (%s) does not fsync every write (jetstream sync_interval is not \"always\"): acknowledged writes can be lost on power loss; set sync_interval: always, or start with --unsafe-no-fsync", r.server, u)
	}
	if read == 0 {
		return fmt.Errorf("nats monitor %s: no server's monitoring endpoint answered, so whether they fsync every write cannot be checked (%w)", o.NatsMonitorURL, readings[0].err)
	}
	return nil
}

func readSyncAlways(monitorURL string) (bool, string, error) {
	var v struct {
		Name      string `json:"server_name"`
		JetStream struct {
			Config *struct {
				SyncAlways bool `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	if err := getJSON(context.Background(), strings.TrimSuffix(monitorURL, "/")+"/varz", 1<<20, &v); err != nil {
		return false, "", err
	}
	if v.JetStream.Config == nil {
		return false, v.Name, errors.New("GET /varz: JetStream is not enabled on this server")
	}
	return v.JetStream.Config.SyncAlways, v.Name, nil
}

func (n *natsConn) close() {
	if n.conn != nil {
		_ = n.conn.Drain()
		n.conn.Close()
	}
	if n.server != nil {
		n.server.Shutdown()
		n.server.WaitForShutdown()
	}
	if n.unlock != nil {
		n.unlock()
	}
}

// metaStream holds the ledger's meta records (trust records, the
// fingerprint key check, MCP session owners): one message per subject,
// first write wins.
const metaStream = "PORTCULLIS_META"

// metaConfig is the meta stream: one record per subject, first write wins.
func metaConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: metaStream, Subjects: []string{"pc.meta.>"}, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		Description: "Portcullis: ledger metadata, one value per subject (root record, enrollments, sealed fingerprint key, key check, MCP session owners)",
		DenyDelete:  true, DenyPurge: true, AllowDirect: true, MaxMsgsPerSubject: 1,
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
		AllowMsgTTL:    true, // session owner records expire (owners.go); nothing else is published with a TTL
		ConsumerLimits: ljs.ConsumerLimits(),
	}
}

// allowMetaTTL lets a META made before session owner records expired take
// per-message TTLs (a setting JetStream can turn on, never off). Only the
// admin user may change a stream: a gateway on a cluster says what to run
// and goes on, its owner records kept for good until then.
func allowMetaTTL(ctx context.Context, js jetstream.JetStream, admin bool, lg *slog.Logger) error {
	s, err := ensureMeta(ctx, js)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if cfg.AllowMsgTTL {
		return nil
	}
	if !admin {
		lg.Warn("the meta stream allows no per-message TTL, so MCP session owner records are kept for good; run `portcullis streams` as the NATS admin", "stream", metaStream)
		return nil
	}
	cfg.AllowMsgTTL = true
	return ljs.Retry(ctx, lg, "stream "+metaStream, func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, cfg)
		return err
	})
}

// ensureMeta opens the meta stream, which ensureStreams created (waiting
// out a cluster without a leader yet).
func ensureMeta(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := ljs.Retry(ctx, nil, "stream "+metaStream, func(ctx context.Context) error {
		var err error
		s, err = js.Stream(ctx, metaStream)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", metaStream, err)
	}
	return s, nil
}

// openForTool opens the ledger's NATS for an operator command (rebuild,
// export, verify, investigate, replay) as the analyst user, who reads every
// stream and writes nothing: quiet unless the options carry a logger.
func openForTool(o Options) (*natsConn, *slog.Logger, error) {
	return openForToolAs(o, natsauth.Analyst)
}

// openForToolAs opens the ledger's NATS for an operator command as role.
func openForToolAs(o Options, role natsauth.Role) (*natsConn, *slog.Logger, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := o.checkSource(); err != nil {
		return nil, nil, err
	}
	n, err := openNATSAs(o, lg, role)
	if err != nil {
		return nil, lg, err
	}
	if err := n.hasLedger(context.Background(), role); err != nil {
		n.close()
		return nil, lg, err
	}
	return n, lg, nil
}

// hasLedger fails, naming where it looked, when the NATS holds no ledger
// (the stream the role reads first is missing), so a command on the wrong
// URL or data dir never reports a clean empty ledger.
func (n *natsConn) hasLedger(ctx context.Context, role natsauth.Role) error {
	name := metaStream
	if role == natsauth.Finance {
		name = keeper.Stream
	}
	ctx, cancel := context.WithTimeout(ctx, ljs.SetupWaitMax)
	defer cancel()
	err := ljs.Retry(ctx, nil, "stream "+name, func(ctx context.Context) error {
		_, err := n.js.Stream(ctx, name)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w on nats %s (no stream %s)", ErrNoLedger, n.url, name)
	}
	if err != nil {
		return fmt.Errorf("nats %s: stream %s: %w", n.url, name, err)
	}
	return nil
}

// NatsServer is the name of the NATS server the gateway is connected to now.
func (g *Gateway) NatsServer() string {
	if g.nats == nil || g.nats.conn == nil {
		return ""
	}
	return g.nats.conn.ConnectedServerName()
}

// CredsFile is the credential file of role for this gateway's embedded
// NATS server ("" when the gateway joined another NATS).
func (g *Gateway) CredsFile(role natsauth.Role) string {
	if g.nats == nil || g.nats.server == nil {
		return ""
	}
	return natsauth.Path(g.nats.credsDir, role)
}
