package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/trust"
)

// sessionOwners keeps MCP session owners in the ledger's meta stream
// (pc.meta.session.<digest>: "<gateway id> <URL>"; first claim wins). A
// claim is believed only when the gateway it names is enrolled at that
// URL: a forged owner record can never make a gateway forward an agent's
// request (and its token) anywhere else.
//
// A record lives ttl (a per-message TTL; META allows them), so the
// records of sessions long gone do not pile up in META; the owner claims
// a session that outlives its record again. On a META made before owner
// records expired (a cluster whose streams the admin has not updated) a
// record is kept for good, as before.
type sessionOwners struct {
	js      jetstream.JetStream
	id      string
	keyring *trust.Keyring
	log     *slog.Logger
	ttl     time.Duration // 0: records never expire

	mu   sync.Mutex
	meta jetstream.Stream // looked up once: a stream's info is a round trip of its own
}

func ownerSubject(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "pc.meta.session." + hex.EncodeToString(sum[:16])
}

// DefaultSessionOwnerTTL is how long a session owner record lives.
const DefaultSessionOwnerTTL = 7 * 24 * time.Hour

// ownerExpiryLag is how long after its TTL an owner record is taken to be
// gone: the server removes expired messages on a timer, not at the instant.
const ownerExpiryLag = 2 * time.Second

// errCodeTTLDisabled is JetStream's answer to a per-message TTL on a
// stream that does not allow them (JSMessageTTLDisabledErr); a record
// already there is errCodeWrongLast.
const errCodeTTLDisabled = 10166

// Claim records this gateway as the session's owner. A record already
// there that is this gateway's own (a claim again whose record has not
// gone yet) is kept and its expiry reported; another's is an error.
func (s *sessionOwners) Claim(ctx context.Context, sessionID, ownerURL string) (time.Time, error) {
	subject, data := ownerSubject(sessionID), []byte(s.id+" "+ownerURL)
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}
	if s.ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(s.ttl))
	}
	start := time.Now()
	_, err := s.js.Publish(ctx, subject, data, opts...)
	if apiErrorCode(err) == errCodeTTLDisabled {
		// A META made before owner records expired (the gateway warned at
		// start): kept for good, as before, until the admin updates it.
		opts = opts[:1]
		_, err = s.js.Publish(ctx, subject, data, opts...)
	}
	switch {
	case apiErrorCode(err) == errCodeWrongLast:
		return s.ownRecord(ctx, subject, data, err)
	case err != nil:
		return time.Time{}, err
	case len(opts) == 1:
		return time.Time{}, nil // kept for good
	}
	return start.Add(s.ttl + ownerExpiryLag), nil
}

// ownRecord reports when the record on subject expires if it says data
// (this gateway's claim), else claimErr.
func (s *sessionOwners) ownRecord(ctx context.Context, subject string, data []byte, claimErr error) (time.Time, error) {
	st, err := s.metaStream(ctx)
	if err != nil {
		return time.Time{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w (and reading the record: %v)", claimErr, err)
	}
	if !bytes.Equal(m.Data, data) {
		return time.Time{}, fmt.Errorf("session owned by another record (%q): %w", m.Data, claimErr)
	}
	ttl, err := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
	if err != nil {
		return time.Time{}, nil // no TTL: kept for good
	}
	return m.Time.Add(ttl + ownerExpiryLag), nil
}

// apiErrorCode is JetStream's error code in err (0: none).
func apiErrorCode(err error) jetstream.ErrorCode {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode
	}
	return 0
}

func (s *sessionOwners) Owner(ctx context.Context, sessionID string) (string, error) {
	st, err := s.metaStream(ctx)
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
	gatewayID, url, _ := strings.Cut(string(m.Data), " ")
	enrolled, err := s.keyring.Enrollments(gatewayID)
	if err != nil {
		return "", err
	}
	for _, e := range enrolled {
		if e.GetListenAddr() == url && url != "" {
			return url, nil
		}
	}
	s.log.Warn("session owner record names no enrolled gateway address; not forwarding", "gateway", gatewayID, "url", url)
	return "", nil
}

func (s *sessionOwners) GatewayURL(_ context.Context, gatewayID string) (string, error) {
	if gatewayID == "" || gatewayID == s.id {
		return "", nil
	}
	enrolled, err := s.keyring.Enrollments(gatewayID)
	if err != nil {
		return "", err
	}
	for i := len(enrolled) - 1; i >= 0; i-- {
		if url := enrolled[i].GetListenAddr(); url != "" {
			return url, nil
		}
	}
	return "", nil
}

// metaStream returns the meta stream's handle, looked up on first use.
func (s *sessionOwners) metaStream(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meta == nil {
		st, err := s.js.Stream(ctx, metaStream)
		if err != nil {
			return nil, err
		}
		s.meta = st
	}
	return s.meta, nil
}

// DefaultMCPSessionIdle is how long a stateful MCP session may go without
// a request before the gateway closes it (the client then gets 404 and
// opens a new one, as MCP has it). Without a limit every session a client
// left without DELETE stayed in the gateway's memory for good.
const DefaultMCPSessionIdle = 24 * time.Hour

// orDefault is d when positive, def when zero and 0 (none) when negative.
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d > 0:
		return d
	case d == 0:
		return def
	default:
		return 0
	}
}
