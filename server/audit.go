package server

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
)

// AuditedStreams are the streams of the record.
// Checkpoints come last, so a verifier has every digest they name.
var AuditedStreams = []string{ledger.ExecutionsStream, keeper.Stream, AuditStream}

// ReadLedger reads the recorded gateway keys (handed to keys first) and
// then every event of the record, stream by stream in sequence order.
func ReadLedger(ctx context.Context, o Options, gotKeys func(map[string]ed25519.PublicKey) error, deliver func(r audit.Record, at time.Time) error) error {
	n, _, err := openForTool(o)
	if err != nil {
		return err
	}
	defer n.close()
	keys := map[string]ed25519.PublicKey{}
	meta, err := n.js.Stream(ctx, metaStream)
	if err == nil {
		info, err := meta.Info(ctx, jetstream.WithSubjectFilter(GatewayKeySubjectPfx+"*"))
		if err != nil {
			return err
		}
		for subj := range info.State.Subjects {
			m, err := meta.GetLastMsgForSubject(ctx, subj)
			if err != nil {
				return err
			}
			k, err := hex.DecodeString(strings.TrimSpace(string(m.Data)))
			if err == nil && len(k) == ed25519.PublicKeySize {
				keys[strings.TrimPrefix(subj, GatewayKeySubjectPfx)] = k
			}
		}
	}
	if err := gotKeys(keys); err != nil {
		return err
	}
	for _, name := range AuditedStreams {
		s, err := n.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		err = ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
			return deliver(audit.Record{Stream: name, Seq: e.Seq, Subject: e.Subject, Data: e.Data}, e.Time)
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	return nil
}
