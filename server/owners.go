package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/trust"
)

// sessionOwners keeps MCP session owners in the ledger's meta stream
// (pc.meta.session.<digest>: "<gateway id> <URL>"; first claim wins). A
// claim is believed only when the gateway it names is enrolled at that
// URL: a forged owner record can never make a gateway forward an agent's
// request (and its token) anywhere else.
type sessionOwners struct {
	js      jetstream.JetStream
	id      string
	keyring *trust.Keyring
	log     *slog.Logger

	mu   sync.Mutex
	meta jetstream.Stream // looked up once: a stream's info is a round trip of its own
}

func ownerSubject(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "pc.meta.session." + hex.EncodeToString(sum[:16])
}

func (s *sessionOwners) Claim(ctx context.Context, sessionID, ownerURL string) error {
	_, err := s.js.Publish(ctx, ownerSubject(sessionID), []byte(s.id+" "+ownerURL), jetstream.WithExpectLastSequencePerSubject(0))
	return err
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
