package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	natsReadyWaitMax = 30 * time.Second
	// defaultNATSPort is where the embedded server listens unless told
	// otherwise (or the port is taken), so a second gateway joins with
	// --nats-url nats://127.0.0.1:4222.
	defaultNATSPort = 4222
)

// natsConn is the connection to the ledger's NATS, and the embedded server
// when there is one.
type natsConn struct {
	server *natsserver.Server
	conn   *nats.Conn
	js     jetstream.JetStream
	url    string
}

// openNATS starts the embedded JetStream server in DIR/jetstream (fsync on
// every write unless relaxed) or connects to o.NatsURL.
func openNATS(o Options, lg *slog.Logger) (*natsConn, error) {
	n := &natsConn{}
	if o.NatsURL != "" {
		nc, err := nats.Connect(o.NatsURL, nats.Name("portcullis"), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", o.NatsURL, err)
		}
		n.conn, n.url = nc, o.NatsURL
	} else {
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
		n.server = ns
		n.url = ns.ClientURL()
		_ = os.WriteFile(filepath.Join(o.DataDir, "nats.url"), []byte(n.url+"\n"), 0o600)
		nc, err := nats.Connect(n.url, nats.InProcessServer(ns), nats.Name("portcullis"), nats.MaxReconnects(-1))
		if err != nil {
			ns.Shutdown()
			return nil, fmt.Errorf("connect embedded nats: %w", err)
		}
		n.conn = nc
	}
	js, err := jetstream.New(n.conn)
	if err != nil {
		n.close()
		return nil, err
	}
	n.js = js
	return n, nil
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
}

// metaStream holds the ledger's meta records (trust records, the
// fingerprint key check, MCP session owners): one message per subject,
// first write wins.
const metaStream = "PORTCULLIS_META"

func ensureMeta(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: metaStream, Subjects: []string{"pc.meta.>"}, Storage: jetstream.FileStorage,
		Description: "Portcullis: ledger metadata, one value per subject (fingerprint key check, shared key, gateway signing keys)",
		DenyDelete:  true, DenyPurge: true, AllowDirect: true, MaxMsgsPerSubject: 1,
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", metaStream, err)
	}
	return s, nil
}

// openForTool opens the ledger's NATS for an operator command (rebuild,
// export, verify): quiet unless the options carry a logger.
func openForTool(o Options) (*natsConn, *slog.Logger, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := o.checkSource(); err != nil {
		return nil, nil, err
	}
	n, err := openNATS(o, lg)
	if err != nil {
		return nil, nil, err
	}
	if err := checkStreams(context.Background(), n.js, o); err != nil {
		n.close()
		return nil, nil, err
	}
	return n, lg, nil
}
