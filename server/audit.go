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
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/projector"
)

// AuditedStreams are the streams of the record.
// Checkpoints come last, so a verifier has every digest they name.
var AuditedStreams = []string{ledger.ExecutionsStream, keeper.Stream, mcp.SessionsStream, AuditStream}

// ReadLedger reads the recorded gateway keys (handed to keys first) and
// then every event of the record, stream by stream in sequence order.
func ReadLedger(ctx context.Context, o Options, gotKeys func(map[string]ed25519.PublicKey) error, deliver func(r audit.Record, at time.Time) error) error {
	return ReadLedgerCounted(ctx, o, gotKeys, nil, deliver)
}

// ReadLedgerCounted is ReadLedger that first hands total the number of
// events the record holds (for a progress bar with a known total).
func ReadLedgerCounted(ctx context.Context, o Options, gotKeys func(map[string]ed25519.PublicKey) error, total func(events uint64), deliver func(r audit.Record, at time.Time) error) error {
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
	if total != nil {
		var events uint64
		for _, name := range AuditedStreams {
			if s, err := n.js.Stream(ctx, name); err == nil {
				events += s.CachedInfo().State.Msgs
			}
		}
		total(events)
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

// ReadIntent reads every event of every execution of the intent that
// executionID (or, when it is empty, the fingerprint) belongs to, for an
// investigation. It returns the execution asked about.
// With an operation key instead, it investigates the latest execution
// accepted under that key (the key is stored in the execution record).
func ReadIntent(ctx context.Context, o Options, executionID, fingerprint, operationKey string) (string, []audit.Stored, error) {
	n, _, err := openForTool(o)
	if err != nil {
		return "", nil, err
	}
	defer n.close()
	s, err := n.js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		return "", nil, fmt.Errorf("stream %s: %w", ledger.ExecutionsStream, err)
	}
	if operationKey != "" {
		if executionID, err = executionByOperationKey(ctx, s, operationKey); err != nil {
			return "", nil, err
		}
	}
	return readIntent(ctx, s, executionID, fingerprint)
}

// executionByOperationKey scans the stream for the latest execution
// accepted under operationKey (the key is stored in the execution record,
// not in a subject).
func executionByOperationKey(ctx context.Context, s jetstream.Stream, operationKey string) (string, error) {
	executionID := ""
	err := ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
		ev, err := ljs.Decode(e.Data)
		if err != nil {
			return err
		}
		if ev.GetType() == pb.EventType_EVENT_TYPE_ACCEPTED && ev.GetExecutionChanged().GetExecution().GetOperationKey() == operationKey {
			executionID = ev.GetExecutionId()
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if executionID == "" {
		return "", fmt.Errorf("%w: no execution with operation key %q", ledger.ErrNotFound, operationKey)
	}
	return executionID, nil
}

func readIntent(ctx context.Context, s jetstream.Stream, executionID, fingerprint string) (string, []audit.Stored, error) {
	var token string
	if executionID != "" {
		if err := ledger.ValidateExecutionID(executionID); err != nil {
			return "", nil, err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("pc.exec.*."+executionID))
		if err != nil {
			return "", nil, err
		}
		for subj := range info.State.Subjects {
			token, _, _ = ledger.ParseExecutionSubject(subj)
		}
		if token == "" {
			return "", nil, fmt.Errorf("%w: execution %s", ledger.ErrNotFound, executionID)
		}
	} else {
		hexFP, ok := strings.CutPrefix(fingerprint, "hmac-sha256:")
		if !ok || len(hexFP) != 64 {
			return "", nil, fmt.Errorf("%w: fingerprint %q is not hmac-sha256:<64 hex>", ledger.ErrInvalid, fingerprint)
		}
		token = "f" + hexFP
	}
	filter := ledger.IntentFilter(token)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return "", nil, err
	}
	total := 0
	for _, c := range info.State.Subjects {
		total += int(c)
	}
	if total == 0 {
		return "", nil, fmt.Errorf("%w: no executions for %s", ledger.ErrNotFound, fingerprint)
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return "", nil, err
	}
	var out []audit.Stored
	for len(out) < total {
		batch, err := c.Fetch(total-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return "", nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return "", nil, err
			}
			ev, err := ljs.Decode(m.Data())
			if err != nil {
				return "", nil, err
			}
			out = append(out, audit.Stored{Seq: md.Sequence.Stream, Event: ev})
			if executionID == "" && ev.GetType() == pb.EventType_EVENT_TYPE_ACCEPTED {
				executionID = ev.GetExecutionId() // the latest execution of the intent
			}
		}
		if got == 0 {
			return "", nil, fmt.Errorf("read %d of %d events of %s", len(out), total, filter)
		}
	}
	// Executions of the same request under other intents (another
	// operation key, another agent run): a full scan of the stream, as an
	// investigation is rare and must not miss a second process.
	digest := ""
	for _, st := range out {
		if st.Event.GetExecutionId() == executionID {
			digest = st.Event.GetExecutionChanged().GetExecution().GetRequestDigest()
			break
		}
	}
	related := map[string]bool{}
	var extra []audit.Stored
	err = ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
		tok, id, ok := ledger.ParseExecutionSubject(e.Subject)
		if !ok || tok == token {
			return nil
		}
		ev, err := ljs.Decode(e.Data)
		if err != nil {
			return err
		}
		if ev.GetType() == pb.EventType_EVENT_TYPE_ACCEPTED && ev.GetExecutionChanged().GetExecution().GetRequestDigest() == digest {
			related[id] = true
		}
		if related[id] {
			extra = append(extra, audit.Stored{Seq: e.Seq, Event: ev})
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return executionID, append(out, extra...), nil
}
