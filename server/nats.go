package server

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/fingerprint"
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

// The fingerprint key: every gateway of one ledger must use the same key,
// or retries through different gateways would never match. The ledger's
// meta stream records a keyed check value, so a gateway with another key
// refuses to start, and (unless --no-share-fingerprint-key) the key itself,
// so a gateway joining with --nats-url and no key of its own adopts it. A
// shared key is as secret as the NATS account is: where the event record is
// readable by people who must not test guesses against fingerprints, give
// the key by flag or env to every gateway and do not share it.
const (
	metaStream      = "PORTCULLIS_META"
	keyCheckSubject = "pc.meta.fingerprint_key_check"
	keySubject      = "pc.meta.fingerprint_key"
)

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

// resolveKey picks the key: flag or env, else the data dir's key file,
// else the key the ledger shares, else a new one (kept in the data dir).
// It then records the check value (and the key, when sharing) or verifies
// it against the ledger's.
func resolveKey(ctx context.Context, js jetstream.JetStream, o Options, lg *slog.Logger) (fingerprint.Key, error) {
	meta, err := ensureMeta(ctx, js)
	if err != nil {
		return nil, err
	}
	var key fingerprint.Key
	switch {
	case o.FingerprintKey != "":
		if key, err = fingerprint.ParseKey(o.FingerprintKey); err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
	case fileExists(filepath.Join(o.DataDir, fingerprint.KeyFile)) || o.NoShareKey:
		if key, err = fingerprint.LoadOrCreateKey(o.DataDir); err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
	default:
		if m, err := meta.GetLastMsgForSubject(ctx, keySubject); err == nil {
			if key, err = fingerprint.ParseKey(strings.TrimSpace(string(m.Data))); err != nil {
				return nil, fmt.Errorf("fingerprint key shared by the ledger: %w", err)
			}
			lg.Info("adopted the fingerprint key shared by the ledger")
			if err := writeKeyFile(o.DataDir, key); err != nil {
				return nil, err
			}
		} else if key, err = fingerprint.LoadOrCreateKey(o.DataDir); err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("portcullis key check v1"))
	check := hex.EncodeToString(m.Sum(nil))
	if _, err := js.Publish(ctx, keyCheckSubject, []byte(check), jetstream.WithExpectLastSequencePerSubject(0)); err == nil {
		if !o.NoShareKey {
			if _, err := js.Publish(ctx, keySubject, []byte(hex.EncodeToString(key)), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				return nil, fmt.Errorf("share fingerprint key: %w", err)
			}
		}
		return key, nil
	}
	got, err := meta.GetLastMsgForSubject(ctx, keyCheckSubject)
	if err != nil {
		return nil, fmt.Errorf("key check: %w", err)
	}
	if string(got.Data) != check {
		return nil, errors.New("fingerprint key differs from the one this ledger was started with: give every gateway the same key (--fingerprint-key or PORTCULLIS_FINGERPRINT_KEY, or copy fingerprint.key)")
	}
	return key, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeKeyFile(dir string, key fingerprint.Key) error {
	p := filepath.Join(dir, fingerprint.KeyFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("fingerprint key: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		return fmt.Errorf("fingerprint key: %w", err)
	}
	return f.Sync()
}

// Gateway keys: each gateway signs what it writes with an Ed25519 key kept
// in its data dir (gateway.ed25519, mode 0600) and records the public key
// in the ledger's meta stream under its id when it starts. The first
// record of an id wins; a gateway whose key differs from its id's record
// refuses to start.
const (
	gatewayKeyFile       = "gateway.ed25519"
	GatewayKeySubjectPfx = "pc.meta.gateway."
)

var gatewayIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func resolveSigningKey(ctx context.Context, js jetstream.JetStream, dataDir, id string) (ed25519.PrivateKey, error) {
	if !gatewayIDPattern.MatchString(id) {
		return nil, fmt.Errorf("gateway id %q: want 1-64 of A-Z a-z 0-9 _ -", id)
	}
	p := filepath.Join(dataDir, gatewayKeyFile)
	var key ed25519.PrivateKey
	if b, err := os.ReadFile(p); err == nil {
		seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%s: not a 32-byte hex seed", p)
		}
		key = ed25519.NewKeyFromSeed(seed)
	} else {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("gateway key: %w", err)
		}
		_, werr := f.WriteString(hex.EncodeToString(priv.Seed()) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("gateway key: %w", werr)
		}
		key = priv
	}
	meta, err := ensureMeta(ctx, js)
	if err != nil {
		return nil, err
	}
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	subj := GatewayKeySubjectPfx + id
	if _, err := js.Publish(ctx, subj, []byte(pub), jetstream.WithExpectLastSequencePerSubject(0)); err == nil {
		return key, nil
	}
	got, err := meta.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, fmt.Errorf("gateway key record: %w", err)
	}
	if string(got.Data) != pub {
		return nil, fmt.Errorf("gateway id %s is recorded in the ledger with another key: give this gateway its own id (--gateway-id) or its original %s", id, gatewayKeyFile)
	}
	return key, nil
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

// sessionOwners keeps MCP session owners in the ledger's meta stream
// (pc.meta.session.<digest>: the owning gateway's URL; first claim wins).
type sessionOwners struct{ js jetstream.JetStream }

func ownerSubject(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "pc.meta.session." + hex.EncodeToString(sum[:16])
}

func (s sessionOwners) Claim(ctx context.Context, sessionID, ownerURL string) error {
	_, err := s.js.Publish(ctx, ownerSubject(sessionID), []byte(ownerURL), jetstream.WithExpectLastSequencePerSubject(0))
	return err
}

func (s sessionOwners) Owner(ctx context.Context, sessionID string) (string, error) {
	st, err := s.js.Stream(ctx, metaStream)
	if err != nil {
		return "", err
	}
	m, err := st.GetLastMsgForSubject(ctx, ownerSubject(sessionID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(m.Data), nil
}
