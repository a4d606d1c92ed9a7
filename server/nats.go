package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/portcullis-dev/portcullis/fingerprint"
)

const natsReadyWaitMax = 30 * time.Second

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
		host, port := "127.0.0.1", -1
		if o.NatsListen != "" {
			h, p, err := net.SplitHostPort(o.NatsListen)
			if err != nil {
				return nil, fmt.Errorf("--nats-listen %q: %w", o.NatsListen, err)
			}
			if port, err = strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("--nats-listen %q: bad port", o.NatsListen)
			}
			host = h
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

// Key check: every gateway of one ledger must use the same fingerprint key,
// or retries through different gateways would never match. The first
// gateway records a keyed check value (not the key); others compare.
const (
	metaStream      = "PORTCULLIS_META"
	keyCheckSubject = "pc.meta.fingerprint_key_check"
)

func checkKey(ctx context.Context, js jetstream.JetStream, key fingerprint.Key) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: metaStream, Subjects: []string{"pc.meta.>"}, Storage: jetstream.FileStorage,
		DenyDelete: true, DenyPurge: true, AllowDirect: true, MaxMsgsPerSubject: 1,
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
	})
	if err != nil {
		return fmt.Errorf("ensure %s: %w", metaStream, err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("portcullis key check v1"))
	check := hex.EncodeToString(m.Sum(nil))
	_, err = js.Publish(ctx, keyCheckSubject, []byte(check), jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		return nil
	}
	s, serr := js.Stream(ctx, metaStream)
	if serr != nil {
		return fmt.Errorf("key check: %w", serr)
	}
	got, gerr := s.GetLastMsgForSubject(ctx, keyCheckSubject)
	if gerr != nil {
		return fmt.Errorf("key check: %w (after %v)", gerr, err)
	}
	if string(got.Data) != check {
		return errors.New("fingerprint key differs from the one this ledger was started with: give every gateway the same key (--fingerprint-key or PORTCULLIS_FINGERPRINT_KEY, or copy fingerprint.key)")
	}
	return nil
}

// loadKey takes the key from the options (flag or env) or the data dir.
func loadKey(o Options) (fingerprint.Key, error) {
	if o.FingerprintKey != "" {
		k, err := fingerprint.ParseKey(o.FingerprintKey)
		if err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
		return k, nil
	}
	k, err := fingerprint.LoadOrCreateKey(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	return k, nil
}
