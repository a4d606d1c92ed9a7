package server

import (
	"context"
	"crypto/ed25519"
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
	"google.golang.org/protobuf/proto"
)

// AuditedStreams are the streams of the record.
// Checkpoints come last, so a verifier has every digest they name.
var AuditedStreams = []string{ledger.ExecutionsStream, keeper.Stream, mcp.SessionsStream, AuditStream}

// ReadLedger reads the ledger's trust material (root record and stored
// enrollments, handed to gotTrust first) and then every event of the
// record, stream by stream in sequence order. It reads one consistent
// cut while gateways write: it takes the checkpoints stream's last
// sequence first and every other stream's after it, and reads each stream
// only up to the sequence taken, so every checkpoint read covers events
// that are read too.
func ReadLedger(ctx context.Context, o Options, gotTrust func(audit.LedgerTrust) error, deliver func(r audit.Record, at time.Time) error) error {
	return ReadLedgerCounted(ctx, o, gotTrust, nil, deliver)
}

// ReadLedgerCounted is ReadLedger that first hands total the number of
// events the cut holds (for a progress bar with a known total).
func ReadLedgerCounted(ctx context.Context, o Options, gotTrust func(audit.LedgerTrust) error, total func(events uint64), deliver func(r audit.Record, at time.Time) error) error {
	n, _, err := openForTool(o)
	if err != nil {
		return err
	}
	defer n.close()
	t, err := ledgerTrust(ctx, n.js)
	if err != nil {
		return err
	}
	if err := gotTrust(t); err != nil {
		return err
	}
	lanes, err := ledgerLanes(ctx, n.js)
	if err != nil {
		return err
	}
	audited := auditedStreams(lanes)
	type cut struct {
		name   string
		stream jetstream.Stream
		last   uint64
	}
	order := append([]string{AuditStream}, audited[:len(audited)-1]...)
	cuts := map[string]cut{}
	for _, name := range order {
		s, err := n.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		last, err := ljs.Source{Stream: s}.LastSeq(ctx)
		if err != nil {
			return err
		}
		cuts[name] = cut{name: name, stream: s, last: last}
	}
	if total != nil {
		var events uint64
		for _, c := range cuts {
			if info, err := c.stream.Info(ctx); err == nil {
				events += min(info.State.Msgs, c.last)
			}
		}
		total(events)
	}
	for _, name := range audited {
		c, ok := cuts[name]
		if !ok || c.last == 0 {
			continue
		}
		err = ljs.Source{Stream: c.stream}.ReadUpTo(ctx, c.last, func(e projector.Entry) error {
			return deliver(audit.Record{Stream: name, Seq: e.Seq, Subject: e.Subject, Data: e.Data}, e.Time)
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	return nil
}

// ledgerTrust reads the root record and every stored enrollment record.
func ledgerTrust(ctx context.Context, js jetstream.JetStream) (audit.LedgerTrust, error) {
	meta, err := js.Stream(ctx, metaStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return audit.LedgerTrust{}, fmt.Errorf("%w: no %s stream", ErrNoLedger, metaStream)
	}
	if err != nil {
		return audit.LedgerTrust{}, err
	}
	m, err := meta.GetLastMsgForSubject(ctx, RootSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return audit.LedgerTrust{}, fmt.Errorf("%w: the meta stream has no root record", ErrNoLedger)
	}
	if err != nil {
		return audit.LedgerTrust{}, err
	}
	t := audit.LedgerTrust{Root: m.Data}
	recs, err := readRecords(ctx, meta, EnrollSubjectPfx+">")
	if err != nil {
		return audit.LedgerTrust{}, err
	}
	for _, sr := range recs {
		b, err := proto.Marshal(sr)
		if err != nil {
			return audit.LedgerTrust{}, err
		}
		t.Enrollments = append(t.Enrollments, b)
	}
	// Where each is, undecodable ones too, so verify names a forged one.
	if t.EnrollmentRecords, err = readStored(ctx, meta, EnrollSubjectPfx+">"); err != nil {
		return audit.LedgerTrust{}, err
	}
	return t, nil
}

// SaveCheckpoint reads the latest checkpoint of every sealed stream, as
// stored, checks it against the ledger's enrolled keys, and returns them
// for `portcullis audit checkpoint` (a later verify pins them).
func SaveCheckpoint(ctx context.Context, o Options) (audit.SavedCheckpoints, error) {
	n, _, err := openForTool(o)
	if err != nil {
		return audit.SavedCheckpoints{}, err
	}
	defer n.close()
	t, err := ledgerTrust(ctx, n.js)
	if err != nil {
		return audit.SavedCheckpoints{}, err
	}
	a, err := t.UnpinnedAnchor()
	if err != nil {
		return audit.SavedCheckpoints{}, err
	}
	keys := a.Keys(t)
	s, err := n.js.Stream(ctx, AuditStream)
	if err != nil {
		return audit.SavedCheckpoints{}, fmt.Errorf("%w: no checkpoints yet (%v)", ErrNoLedger, err)
	}
	lanes, err := ledgerLanes(ctx, n.js)
	if err != nil {
		return audit.SavedCheckpoints{}, err
	}
	out := audit.SavedCheckpoints{SavedAt: time.Now().UTC()}
	for _, stream := range sealedStreams(lanes) {
		m, err := s.GetLastMsgForSubject(ctx, CheckpointSubject(stream))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return audit.SavedCheckpoints{}, err
		}
		ev, err := ljs.Decode(m.Data)
		if err != nil || ev.GetCheckpoint() == nil || ledger.CheckSigned(ev, keyMap(keys)) != nil {
			return audit.SavedCheckpoints{}, fmt.Errorf("the latest checkpoint of %s (seq %d) does not verify: run audit verify", stream, m.Sequence)
		}
		out.Checkpoints = append(out.Checkpoints, audit.Record{Stream: AuditStream, Seq: m.Sequence, Subject: m.Subject, Data: m.Data})
	}
	if len(out.Checkpoints) == 0 {
		return audit.SavedCheckpoints{}, errors.New("no checkpoints yet: gateways seal every --checkpoint-every")
	}
	return out, nil
}

// keyMap adapts resolved keys to ledger.Keys.
type keyMap map[string][]ed25519.PublicKey

func (k keyMap) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return k[id], nil }

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
	lanes, err := ledgerLanes(ctx, n.js)
	if err != nil {
		return "", nil, err
	}
	var streams []jetstream.Stream
	for _, name := range lanes.Streams() {
		s, err := n.js.Stream(ctx, name)
		if err != nil {
			return "", nil, fmt.Errorf("stream %s: %w", name, err)
		}
		streams = append(streams, s)
	}
	keys, err := ledgerKeyring(ctx, n.js, Options{})
	if err != nil {
		return "", nil, err
	}
	if operationKey != "" {
		if executionID, err = executionByOperationKey(ctx, streams, keys, operationKey); err != nil {
			return "", nil, err
		}
	}
	ss, _ := n.js.Stream(ctx, mcp.SessionsStream) // nil: no sessions journal yet
	return readIntent(ctx, streams, ss, keys, executionID, fingerprint)
}

// executionByOperationKey scans the stream for the latest execution
// accepted under operationKey (the key is stored in the execution record,
// not in a subject). Quarantined messages are not evidence.
func executionByOperationKey(ctx context.Context, lanes []jetstream.Stream, keys ledger.Keys, operationKey string) (string, error) {
	executionID := ""
	for _, s := range lanes {
		if err := latestByOperationKey(ctx, s, keys, operationKey, &executionID); err != nil {
			return "", err
		}
	}
	if executionID == "" {
		return "", fmt.Errorf("%w: no execution with operation key %q", ledger.ErrNotFound, operationKey)
	}
	return executionID, nil
}

// latestByOperationKey scans one lane for the latest execution accepted
// under operationKey (ids are ULIDs: the latest of the lanes' is the
// greatest).
func latestByOperationKey(ctx context.Context, s jetstream.Stream, keys ledger.Keys, operationKey string, executionID *string) error {
	return ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
		ev, err := decodeSigned(e.Subject, e.Data, keys)
		if errors.Is(err, ledger.ErrKeysUnavailable) {
			return err
		}
		if err != nil {
			return nil // quarantined: not evidence
		}
		if ledger.StartsExecution(ev.GetType()) && ev.GetExecutionChanged().GetExecution().GetOperationKey() == operationKey && ev.GetExecutionId() > *executionID {
			*executionID = ev.GetExecutionId()
		}
		return nil
	})
}

// decodeSigned decodes a stored event and checks it as the fold does
// (subject, hash, enrolled writer's signature): an investigation never
// takes a quarantined message as evidence, and never stops on one.
func decodeSigned(subject string, data []byte, keys ledger.Keys) (*pb.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ledger.ErrCorrupt, err)
	}
	if ev.GetSubject() != subject {
		return nil, fmt.Errorf("%w: the event names subject %s", ledger.ErrCorrupt, ev.GetSubject())
	}
	return ev, ledger.CheckSigned(ev, keys)
}

// chainCheck keeps the latest valid event per execution subject, so an
// investigation also skips what the fold quarantines for its chain or
// transition (a replayed old event, say). Events come in stream order.
type chainCheck map[string]*pb.Event

func (c chainCheck) follows(ev *pb.Event) bool {
	if ledger.CheckNext(c[ev.GetSubject()], ev) != nil {
		return false
	}
	c[ev.GetSubject()] = ev
	return true
}

// readIntent reads an intent's events from its lane (lanes[k] is lane k's
// stream), related executions from every lane, and their journal entries.
func readIntent(ctx context.Context, lanes []jetstream.Stream, sessions jetstream.Stream, keys ledger.Keys, executionID, fingerprint string) (string, []audit.Stored, error) {
	var token string
	var s jetstream.Stream
	n := ledger.Lanes(len(lanes))
	if executionID != "" {
		if err := ledger.ValidateExecutionID(executionID); err != nil {
			return "", nil, err
		}
		for k, ls := range lanes { // the id alone does not name its lane: ask each
			info, err := ls.Info(ctx, jetstream.WithSubjectFilter(ledger.LanePrefix(k)+"*."+executionID))
			if err != nil {
				return "", nil, err
			}
			for subj := range info.State.Subjects {
				token, _, _ = ledger.ParseExecutionSubject(subj)
				s = ls
			}
			if token != "" {
				break
			}
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
		s = lanes[n.Of(token, "")]
	}
	filter := n.IntentFilter(token)
	if token == ledger.ReadOnlyToken {
		filter = ledger.LanePrefix(n.Of(token, executionID)) + token + ".*"
	}
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
	chain := chainCheck{}
	for read := 0; read < total; {
		batch, err := c.Fetch(total-read, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return "", nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			read++
			md, err := m.Metadata()
			if err != nil {
				return "", nil, err
			}
			ev, err := decodeSigned(m.Subject(), m.Data(), keys)
			if errors.Is(err, ledger.ErrKeysUnavailable) {
				return "", nil, err
			}
			if err != nil || !chain.follows(ev) {
				continue // quarantined: not evidence
			}
			out = append(out, audit.Stored{Seq: md.Sequence.Stream, Event: ev, Stream: md.Stream})
			if executionID == "" && ledger.StartsExecution(ev.GetType()) {
				executionID = ev.GetExecutionId() // the latest execution of the intent
			}
		}
		if got == 0 {
			return "", nil, fmt.Errorf("read %d of %d events of %s", read, total, filter)
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
	for _, s := range lanes {
		if err := relatedIn(ctx, s, keys, token, digest, chain, related, &extra); err != nil {
			return "", nil, err
		}
	}
	out = append(out, extra...)
	journal, err := readJournal(ctx, sessions, keys, out)
	if err != nil {
		return "", nil, err
	}
	return executionID, append(out, journal...), nil
}

// relatedIn adds to extra the events of one lane's executions of the same
// request (digest) under intents other than token.
func relatedIn(ctx context.Context, s jetstream.Stream, keys ledger.Keys, token, digest string, chain chainCheck, related map[string]bool, extra *[]audit.Stored) error {
	var name string
	if info := s.CachedInfo(); info != nil {
		name = info.Config.Name
	}
	return ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
		tok, id, ok := ledger.ParseExecutionSubject(e.Subject)
		if !ok || tok == token {
			return nil
		}
		ev, err := decodeSigned(e.Subject, e.Data, keys)
		if errors.Is(err, ledger.ErrKeysUnavailable) {
			return err
		}
		if err != nil || !chain.follows(ev) {
			return nil // quarantined: not evidence
		}
		if ledger.StartsExecution(ev.GetType()) && ev.GetExecutionChanged().GetExecution().GetRequestDigest() == digest {
			related[id] = true
		}
		if related[id] {
			*extra = append(*extra, audit.Stored{Seq: e.Seq, Event: ev, Stream: name})
		}
		return nil
	})
}

// readJournal reads the signed sessions-journal entry of every session the
// calls named (the latest valid one per session; none when the journal
// does not hold it).
func readJournal(ctx context.Context, sessions jetstream.Stream, keys ledger.Keys, events []audit.Stored) ([]audit.Stored, error) {
	if sessions == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []audit.Stored
	for _, st := range events {
		sid := st.Event.GetExecutionChanged().GetCorrelation().GetSessionId()
		if sid == "" || seen[sid] {
			continue
		}
		seen[sid] = true
		subj := mcp.SessionSubject(sid)
		m, err := sessions.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sessions journal %s: %w", subj, err)
		}
		ev, err := decodeSigned(subj, m.Data, keys)
		if errors.Is(err, ledger.ErrKeysUnavailable) {
			return nil, err
		}
		if err != nil || ev.GetSessionChanged().GetSessionId() != sid {
			continue // quarantined: not evidence
		}
		out = append(out, audit.Stored{Seq: m.Sequence, Event: ev})
	}
	return out, nil
}
