package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/trust"
	"google.golang.org/protobuf/proto"
)

// Trust records in the ledger's meta stream (PORTCULLIS_META, one message
// per subject, first write wins). None of them is believed for being
// there: the root record is pinned by every gateway that saw it first
// (DATA_DIR/root.pub) and self-signed; an enrollment counts only with the
// root's signature; the fingerprint key is stored only sealed.
const (
	// RootKeyFile is where the embedded default keeps the root's private
	// half (0600, fsynced). Move it offline once the gateways are enrolled.
	RootKeyFile       = "root.key"
	rootPubFile       = "root.pub"
	gatewayKeyFile    = "gateway.ed25519"
	RootSubject       = "pc.meta.root"
	EnrollSubjectPfx  = "pc.meta.enroll." // + gateway id + "." + record digest
	sealedKeyRoot     = "pc.meta.fpkey.root"
	sealedKeyPfx      = "pc.meta.fpkey.gw." // + gateway id + "." + box key digest
	keyCheckSubject   = "pc.meta.fingerprint_key_check"
	metaLookupWaitMax = 5 * time.Second
)

var gatewayIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// identity is what a gateway knows of the ledger's trust: its own signing
// key, the root public key, the root private key when the operator gave
// it, and the keyring of enrolled gateways.
type identity struct {
	signKey ed25519.PrivateKey
	rootKey ed25519.PrivateKey // nil unless given (or created here)
	root    *pb.RootIdentity
	keyring *trust.Keyring
}

// openIdentity loads (or creates) this gateway's signing key, finds or
// creates the ledger's root, and builds the keyring. It does not enroll.
func openIdentity(ctx context.Context, js jetstream.JetStream, o Options, lg *slog.Logger) (*identity, error) {
	meta, err := ensureMeta(ctx, js)
	if err != nil {
		return nil, err
	}
	id := &identity{}
	if o.SigningKey != "" {
		id.signKey, err = trust.LoadKey(o.SigningKey)
	} else {
		id.signKey, _, err = trust.LoadOrCreateKey(filepath.Join(o.DataDir, gatewayKeyFile))
	}
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	rootRef := o.RootKey
	if rootRef == "" && fileExists(filepath.Join(o.DataDir, RootKeyFile)) {
		rootRef = filepath.Join(o.DataDir, RootKeyFile)
	}
	if rootRef != "" {
		if id.rootKey, err = trust.LoadKey(rootRef); err != nil {
			return nil, fmt.Errorf("root key: %w", err)
		}
	}
	created := ""
	if id.root, err = readRoot(ctx, meta); errors.Is(err, jetstream.ErrMsgNotFound) {
		if id.rootKey == nil {
			p := filepath.Join(o.DataDir, RootKeyFile)
			if id.rootKey, err = trust.CreateKeyFile(p); err != nil {
				return nil, fmt.Errorf("root key: %w", err)
			}
			created = p
			lg.Warn("created the ledger's root key; it signs gateway enrollments: keep it safe, move it offline once the gateways are enrolled", "file", p)
		}
		root := trust.NewRoot(id.rootKey, time.Now())
		if lanes := newLedgerLanes(o); lanes.Count() > 1 {
			root = trust.NewLedgerRoot(id.rootKey, time.Now(), uint32(lanes.Count()))
		}
		rec, merr := proto.Marshal(root)
		if merr != nil {
			return nil, merr
		}
		if _, perr := js.Publish(ctx, RootSubject, rec, jetstream.WithExpectLastSequencePerSubject(0)); perr != nil {
			if ljs.Transient(perr) {
				return nil, fmt.Errorf("record the ledger root: %w", perr) // the caller retries
			}
			lg.Info("another gateway recorded the root first", "err", perr)
		}
		id.root, err = readRootWritten(ctx, meta)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger root: %w", err)
	}
	if id.rootKey != nil && !bytes.Equal(id.rootKey.Public().(ed25519.PublicKey), id.root.GetPublicKey()) {
		if created == "" {
			return nil, errors.New("the root key given is not this ledger's root")
		}
		// Another gateway created the ledger at the same moment: this one's
		// new root key is nobody's; it must be enrolled like any other.
		if err := os.Remove(created); err != nil {
			return nil, fmt.Errorf("root key: %w", err)
		}
		id.rootKey = nil
	}
	if err := pinRoot(o, id.root.GetPublicKey()); err != nil {
		return nil, err
	}
	id.keyring = trust.NewKeyring(id.root.GetPublicKey(), metaEnrollments(js.Conn(), meta))
	return id, nil
}

func readRoot(ctx context.Context, meta jetstream.Stream) (*pb.RootIdentity, error) {
	m, err := meta.GetLastMsgForSubject(ctx, RootSubject)
	if err != nil {
		return nil, err
	}
	sr := new(pb.SignedRecord)
	if err := proto.Unmarshal(m.Data, sr); err != nil {
		return nil, fmt.Errorf("%w: root record: %v", trust.ErrBadRecord, err)
	}
	return trust.OpenRoot(sr)
}

// readRootWritten reads the root record just written (by this gateway or
// the one that won): a direct get may be served by a replica that has not
// applied it yet, so a missing record is asked for again, briefly.
func readRootWritten(ctx context.Context, meta jetstream.Stream) (*pb.RootIdentity, error) {
	for range rootReadTries - 1 {
		r, err := readRoot(ctx, meta)
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return r, err
		}
		select {
		case <-time.After(rootReadWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return readRoot(ctx, meta)
}

// How long readRootWritten waits for a replica to apply the root record.
const (
	rootReadTries = 20
	rootReadWait  = 100 * time.Millisecond
)

// pinRoot compares the ledger's root with the one this gateway saw first
// (or was given), and pins it on first sight: a meta stream rewritten
// behind the gateway's back is refused, not believed.
func pinRoot(o Options, pub ed25519.PublicKey) error {
	if o.RootPublicKey != "" {
		want, err := trust.ParsePublicKey(o.RootPublicKey)
		if err != nil {
			return fmt.Errorf("--root-public-key: %w", err)
		}
		if !bytes.Equal(want, pub) {
			return fmt.Errorf("the ledger's root key %x is not the one given by --root-public-key", pub)
		}
	}
	if o.DataDir == "" {
		return nil
	}
	p := filepath.Join(o.DataDir, rootPubFile)
	if b, err := os.ReadFile(p); err == nil {
		pinned, err := trust.ParsePublicKey(string(b))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if !bytes.Equal(pinned, pub) {
			return fmt.Errorf("the ledger's root key %x differs from the one pinned in %s: refusing a ledger whose root changed", pub, p)
		}
		return nil
	}
	return os.WriteFile(p, []byte(hex.EncodeToString(pub)+"\n"), 0o600)
}

// metaEnrollments reads the stored enrollment records of one gateway id,
// in stream order, for the keyring (which bounds how many count).
func metaEnrollments(nc *nats.Conn, meta jetstream.Stream) trust.Lookup {
	return func(ctx context.Context, gatewayID string, afterSeq uint64, limit int) ([]trust.StoredRecord, error) {
		if !gatewayIDPattern.MatchString(gatewayID) {
			return nil, nil
		}
		return readEnrollRecords(ctx, nc, meta, gatewayID, afterSeq, limit)
	}
}

// readEnrollRecords reads up to limit records stored under
// pc.meta.enroll.<gateway id>.* after sequence afterSeq, oldest first, one
// get each (the next message on the filter), so a look-up costs what it
// reads and never lists every subject of the id. It returns what it read
// before an error with the error.
//
// The gets go to the stream's leader ($JS.API.STREAM.MSG.GET), not to any
// replica as a direct get does: a replica that has not caught up answers
// "no such message" for a record just stored, and that answer is taken
// here as "not enrolled" (a gateway joining a cluster refused to start
// over its own record, and a peer would quarantine the new gateway's
// first events). While the stream has no leader (an election: 10008, no
// responders, a timeout) a get goes to any replica instead, as before:
// a gateway restarted during an election could not start at all (the
// fault campaign).
func readEnrollRecords(ctx context.Context, nc *nats.Conn, meta jetstream.Stream, gatewayID string, afterSeq uint64, limit int) ([]trust.StoredRecord, error) {
	filter := EnrollSubjectPfx + gatewayID + ".*"
	var out []trust.StoredRecord
	for len(out) < limit {
		r, err := leaderNextMsg(ctx, nc, metaStream, filter, afterSeq+1)
		if err != nil && ljs.Transient(err) {
			r, err = replicaNextMsg(ctx, meta, filter, afterSeq+1)
		}
		if err != nil {
			return out, err
		}
		if r == nil {
			break
		}
		out = append(out, *r)
		afterSeq = r.Seq
	}
	return out, nil
}

// leaderNextMsg is the first message on filter at or after seq, as the
// stream's leader holds it (nil: none).
func leaderNextMsg(ctx context.Context, nc *nats.Conn, stream, filter string, seq uint64) (*trust.StoredRecord, error) {
	m, err := ljs.LeaderMsg(ctx, nc, stream, seq, filter)
	if m == nil || err != nil {
		return nil, err
	}
	return &trust.StoredRecord{Seq: m.Seq, Data: m.Data}, nil
}

// replicaNextMsg is leaderNextMsg answered by any replica (a direct get).
func replicaNextMsg(ctx context.Context, meta jetstream.Stream, filter string, seq uint64) (*trust.StoredRecord, error) {
	m, err := meta.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &trust.StoredRecord{Seq: m.Sequence, Data: m.Data}, nil
}

func readRecords(ctx context.Context, meta jetstream.Stream, filter string) ([]*pb.SignedRecord, error) {
	info, err := meta.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, err
	}
	var out []*pb.SignedRecord
	for subj := range info.State.Subjects {
		m, err := meta.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return nil, err
		}
		sr := new(pb.SignedRecord)
		if proto.Unmarshal(m.Data, sr) == nil {
			out = append(out, sr)
		}
	}
	return out, nil
}

// EnrollmentSubject is where a signed enrollment is stored: one subject
// per distinct record, so a forged record never blocks the real one.
func EnrollmentSubject(sr *pb.SignedRecord, gatewayID string) string {
	sum := sha256.Sum256(sr.GetRecord())
	return EnrollSubjectPfx + gatewayID + "." + hex.EncodeToString(sum[:8])
}

// publishEnrollment stores a signed enrollment (idempotent). Its subject
// is named by the record's digest; one that holds other bytes was taken by
// someone else (or by a digest collision), and is reported, not taken for
// this record.
func publishEnrollment(ctx context.Context, js jetstream.JetStream, gatewayID string, sr *pb.SignedRecord) (seq uint64, err error) {
	b, err := proto.Marshal(sr)
	if err != nil {
		return 0, err
	}
	subj := EnrollmentSubject(sr, gatewayID)
	ack, err := js.Publish(ctx, subj, b, jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		meta, merr := js.Stream(ctx, metaStream)
		if merr != nil {
			return 0, merr
		}
		m, gerr := meta.GetLastMsgForSubject(ctx, subj)
		if gerr != nil {
			return 0, fmt.Errorf("%s is taken, and reading it: %w", subj, gerr)
		}
		if !bytes.Equal(m.Data, b) {
			return 0, fmt.Errorf("%s already holds a record this command did not write (seq %d): run the command again (a new record gets a new subject)", subj, m.Sequence)
		}
		return m.Sequence, nil // the same record is already there
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// ensureEnrolled makes sure this gateway's key is enrolled at its address:
// with the root key it enrolls itself; without, an operator must have run
// `portcullis enroll`. An unenrolled gateway refuses to start (it could
// not write anything other gateways would count).
func ensureEnrolled(ctx context.Context, js jetstream.JetStream, id *identity, gatewayID, addr string, lg *slog.Logger) error {
	pub := id.signKey.Public().(ed25519.PublicKey)
	enrolledAt := false
	isEnrolled := false
	enrolled, err := id.keyring.Enrollments(gatewayID)
	if err != nil {
		return err
	}
	for _, e := range enrolled {
		if bytes.Equal(e.GetPublicKey(), pub) {
			isEnrolled = true
			enrolledAt = enrolledAt || e.GetListenAddr() == addr
		}
	}
	if enrolledAt {
		return nil
	}
	if id.rootKey == nil {
		if isEnrolled {
			lg.Warn("this gateway is enrolled at another address: sessions are forwarded to it only at its enrolled address; re-enroll with `portcullis enroll --addr`", "addr", addr)
			return nil
		}
		boxPub, _ := trust.BoxKeys(id.signKey)
		return fmt.Errorf("gateway %s is not enrolled in this ledger, so nothing it wrote would count: enroll it with the root key "+
			"(`portcullis enroll --root-key FILE --gateway-id %s --public-key %x --box-key %x --addr %s --nats-url URL`) or start it with --root-key FILE",
			gatewayID, gatewayID, pub, boxPub[:], addr)
	}
	sr := trust.EnrollSelf(id.rootKey, id.signKey, gatewayID, addr, time.Now())
	seq, err := publishEnrollment(ctx, js, gatewayID, sr)
	if err != nil {
		return fmt.Errorf("enroll %s: %w", gatewayID, err)
	}
	meta, err := ensureMeta(ctx, js)
	if err != nil {
		return err
	}
	if err := enrollmentCounts(ctx, js.Conn(), meta, gatewayID, sr, seq); err != nil {
		return err
	}
	if _, err := id.keyring.Add(sr); err != nil {
		return err
	}
	lg.Info("enrolled this gateway with the root key", "addr", addr)
	return nil
}

// Enroll signs an enrollment with the root key and stores it, with the
// ledger's fingerprint key sealed to the gateway inside it (when the
// ledger shares it), for `portcullis enroll`. It returns notes for the
// operator: what it did not do, and records it found that it did not
// write.
func Enroll(ctx context.Context, o Options, rootKeyRef, gatewayID, pubHex, boxHex, addr string) ([]string, error) {
	if !gatewayIDPattern.MatchString(gatewayID) {
		return nil, fmt.Errorf("gateway id %q: want 1-64 of A-Z a-z 0-9 _ -", gatewayID)
	}
	rootKey, err := trust.LoadKey(rootKeyRef)
	if err != nil {
		return nil, fmt.Errorf("root key: %w", err)
	}
	pub, err := trust.ParsePublicKey(pubHex)
	if err != nil {
		return nil, err
	}
	box, err := hex.DecodeString(boxHex)
	if err != nil || len(box) != 32 {
		return nil, fmt.Errorf("--box-key: want 32 bytes of hex")
	}
	// The enrollment is an append to pc.meta.*: the gateway user may make
	// it, the analyst user (openForTool) may not.
	n, _, err := openForToolAs(o, natsauth.Gateway)
	if err != nil {
		return nil, err
	}
	defer n.close()
	meta, err := ensureMeta(ctx, n.js)
	if err != nil {
		return nil, err
	}
	root, err := readRoot(ctx, meta)
	if err != nil {
		return nil, fmt.Errorf("ledger root: %w", err)
	}
	if !bytes.Equal(rootKey.Public().(ed25519.PublicKey), root.GetPublicKey()) {
		return nil, errors.New("the root key given is not this ledger's root")
	}
	taken, err := readEnrollRecords(ctx, n.js.Conn(), meta, gatewayID, 0, trust.EnrollRecordsMax)
	if err != nil {
		return nil, fmt.Errorf("enrollment records of %s: %w", gatewayID, err)
	}
	if len(taken) >= trust.EnrollRecordsMax {
		return nil, fmt.Errorf("gateway id %s already holds %d enrollment records, the most that count for one id (anyone with the gateway NATS credentials can store records under any id): "+
			"another would never be trusted; enroll this gateway under another id and start it with --gateway-id set to it", gatewayID, len(taken))
	}
	var notes []string
	e := &pb.Enrollment{GatewayId: gatewayID, PublicKey: pub, ListenAddr: addr, EnrolledUnixNano: time.Now().UnixNano(), BoxPublicKey: box}
	key, err := openSealedRoot(ctx, meta, rootKey)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		notes = append(notes, "the ledger does not share its fingerprint key (--no-share-fingerprint-key): give the gateway the key with --fingerprint-key")
	case err != nil:
		notes = append(notes, fmt.Sprintf("the fingerprint key sealed to the root on %s does not open with the root key (%v): not shared with %s; give it the key with --fingerprint-key", sealedKeyRoot, err, gatewayID))
	default:
		// The root's copy is a record anyone with the gateway NATS
		// credentials could have stored first: seal it on only if it is
		// the key the ledger was started with.
		if ok, cerr := matchesKeyCheck(ctx, meta, key); cerr != nil {
			return nil, cerr
		} else if !ok {
			notes = append(notes, fmt.Sprintf("the fingerprint key sealed to the root on %s does not match the ledger's key check (%s), so no gateway of this ledger wrote it: not shared with %s; give it the key with --fingerprint-key", sealedKeyRoot, keyCheckSubject, gatewayID))
			break
		}
		if e.FingerprintKey, err = trust.SealKey(key, box); err != nil {
			return nil, err
		}
	}
	if m, err := meta.GetLastMsgForSubject(ctx, sealedKeySubject(gatewayID, box)); err == nil {
		notes = append(notes, fmt.Sprintf("%s (seq %d) holds a sealed key this command did not write (an earlier version's enroll, or anyone with the gateway NATS credentials): %s ignores it unless it matches the ledger's key check, and takes the key from this enrollment first", sealedKeySubject(gatewayID, box), m.Sequence, gatewayID))
	}
	sr := trust.Enroll(rootKey, e)
	seq, err := publishEnrollment(ctx, n.js, gatewayID, sr)
	if err != nil {
		return notes, fmt.Errorf("enroll %s: %w", gatewayID, err)
	}
	return notes, enrollmentCounts(ctx, n.js.Conn(), meta, gatewayID, sr, seq)
}

// enrollmentCounts checks that a stored enrollment is among the first
// trust.EnrollRecordsMax records of its id, the ones gateways read:
// records stored before it (by anyone with the gateway NATS credentials)
// may have pushed it past them, and an enrollment no gateway trusts must
// not be reported as done.
//
// The record is stored at seq. Only a read that shows it (or shows the
// id's first records all before it) decides; until one does (the reads
// go to the leader, so this is a guard, not the rule), it reads again for
// up to readBackMax, then takes what an acknowledged record with fewer
// records before it means: it counts.
func enrollmentCounts(ctx context.Context, nc *nats.Conn, meta jetstream.Stream, gatewayID string, sr *pb.SignedRecord, seq uint64) error {
	deadline := time.Now().Add(readBackMax)
	for {
		stored, err := readEnrollRecords(ctx, nc, meta, gatewayID, 0, trust.EnrollRecordsMax)
		if err != nil {
			return fmt.Errorf("enrollment records of %s: %w", gatewayID, err)
		}
		before, seen := 0, false
		for _, r := range stored {
			switch {
			case r.Seq < seq:
				before++
			case r.Seq == seq:
				seen = true
			}
		}
		if before >= trust.EnrollRecordsMax {
			return fmt.Errorf("the enrollment of %s was stored on %s after the first %d records of its id (anyone with the gateway NATS credentials can store records under any id), so no gateway trusts it: enroll this gateway under another id", gatewayID, EnrollmentSubject(sr, gatewayID), trust.EnrollRecordsMax)
		}
		if seen || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(readBackPause):
		}
	}
}

// readBackMax bounds how long enrollmentCounts waits for a replica's read
// to show a record just stored; readBackPause is the pause between reads.
const (
	readBackMax   = 5 * time.Second
	readBackPause = 20 * time.Millisecond
)

// The fingerprint key: every gateway of one ledger must use the same key,
// or retries through different gateways would never match. The meta
// stream records a keyed check value, so a gateway with another key
// refuses to start, and (unless --no-share-fingerprint-key) the key
// sealed to the root and to each enrolled gateway's box key: a NATS
// reader sees only sealed boxes.

// resolveKey picks the fingerprint key: flag or env (a hex key or an
// env:/file: reference), else the data dir's key file, else the key the
// ledger shares sealed to this gateway or to the root key, else a new one.
// It then records the check value (and the sealed key, when sharing) or
// verifies it against the ledger's.
func resolveKey(ctx context.Context, js jetstream.JetStream, o Options, id *identity, gatewayID string, lg *slog.Logger) (fingerprint.Key, error) {
	meta, err := ensureMeta(ctx, js)
	if err != nil {
		return nil, err
	}
	var key fingerprint.Key
	switch {
	case o.FingerprintKey != "":
		if key, err = parseKeyRef(o.FingerprintKey); err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
	case fileExists(filepath.Join(o.DataDir, fingerprint.KeyFile)) || o.NoShareKey:
		if key, err = fingerprint.LoadOrCreateKey(o.DataDir); err != nil {
			return nil, fmt.Errorf("fingerprint key: %w", err)
		}
	default:
		check, cerr := meta.GetLastMsgForSubject(ctx, keyCheckSubject)
		if errors.Is(cerr, jetstream.ErrMsgNotFound) {
			// No gateway recorded a key yet: a sealed key found now has
			// nothing to be checked against, so none is adopted.
			if key, err = fingerprint.LoadOrCreateKey(o.DataDir); err != nil {
				return nil, fmt.Errorf("fingerprint key: %w", err)
			}
			break
		}
		if cerr != nil {
			return nil, fmt.Errorf("key check: %w", cerr)
		}
		var forged []string
		key, forged, err = adoptSharedKey(ctx, js.Conn(), meta, id, gatewayID, string(check.Data))
		for _, f := range forged {
			lg.Warn("ignored a sealed fingerprint key: it is not the key this ledger was started with (anyone with the gateway NATS credentials can seal a key to this gateway; nothing of it was kept)", "record", f)
		}
		if err != nil {
			if len(forged) > 0 {
				return nil, fmt.Errorf("the ledger has a fingerprint key but shares none this gateway can open (%v); ignored %d sealed key(s) that do not match the ledger's key check (%s): enroll this gateway again with `portcullis enroll` (the enrollment carries the key, sealed and signed by the root), or give --fingerprint-key", err, len(forged), strings.Join(forged, "; "))
			}
			return nil, fmt.Errorf("the ledger has a fingerprint key but shares none this gateway can open (%v): enroll it with `portcullis enroll` (which seals the key to it), start it with --root-key, or give --fingerprint-key", err)
		}
		// Written only now, after the key check matched: a key kept in the
		// data dir is used without question at every later start.
		lg.Info("adopted the fingerprint key the ledger shares sealed")
		if err := writeKeyFile(o.DataDir, key); err != nil {
			return nil, err
		}
	}
	check := keyCheck(key)
	_, err = js.Publish(ctx, keyCheckSubject, []byte(check), jetstream.WithExpectLastSequencePerSubject(0))
	switch {
	case err == nil:
	case ljs.Transient(err):
		// No answer (an election): whether it landed is read on the retry.
		return nil, fmt.Errorf("key check: %w", err)
	default:
		got, err := meta.GetLastMsgForSubject(ctx, keyCheckSubject)
		if err != nil {
			return nil, fmt.Errorf("key check: %w", err)
		}
		if string(got.Data) != check {
			hint := ""
			if o.FingerprintKey == "" && fileExists(filepath.Join(o.DataDir, fingerprint.KeyFile)) && !o.NoShareKey {
				// Earlier versions wrote a key adopted from the ledger
				// here before checking it, a forged one included.
				hint = fmt.Sprintf("; if this gateway adopted %s from the ledger rather than being given it, remove the file and start it again to adopt the ledger's key", filepath.Join(o.DataDir, fingerprint.KeyFile))
			}
			return nil, errors.New("fingerprint key differs from the one this ledger was started with: give every gateway the same key (--fingerprint-key or PORTCULLIS_FINGERPRINT_KEY, or copy fingerprint.key)" + hint)
		}
	}
	if !o.NoShareKey {
		// Sealed to the root and to this gateway. The root's share is the
		// first gateway's; each later one finds it there ("already
		// shared"), and a first gateway whose key check landed without an
		// answer makes it on the retry.
		boxPub, _ := trust.BoxKeys(id.signKey)
		if err := shareKey(ctx, js, key, "", id.root.GetBoxPublicKey()); err != nil {
			return nil, fmt.Errorf("share fingerprint key: %w", err)
		}
		if err := shareKey(ctx, js, key, gatewayID, boxPub[:]); err != nil {
			return nil, fmt.Errorf("share fingerprint key: %w", err)
		}
	}
	return key, nil
}

func parseKeyRef(s string) (fingerprint.Key, error) {
	switch {
	case strings.HasPrefix(s, "env:"):
		v := os.Getenv(strings.TrimPrefix(s, "env:"))
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is not set", strings.TrimPrefix(s, "env:"))
		}
		s = v
	case strings.HasPrefix(s, "file:"):
		b, err := os.ReadFile(strings.TrimPrefix(s, "file:"))
		if err != nil {
			return nil, err
		}
		s = string(b)
	}
	return fingerprint.ParseKey(s)
}

// keyCheck is the value the meta stream records for the fingerprint key
// (pc.meta.fingerprint_key_check): an HMAC under the key, so it names the
// key without revealing it, and only a holder of the key can match it.
func keyCheck(key fingerprint.Key) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("portcullis key check v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// matchesKeyCheck reports whether key is the one the ledger records the
// check value of.
func matchesKeyCheck(ctx context.Context, meta jetstream.Stream, key fingerprint.Key) (bool, error) {
	got, err := meta.GetLastMsgForSubject(ctx, keyCheckSubject)
	if err != nil {
		return false, fmt.Errorf("key check: %w", err)
	}
	return hmac.Equal(got.Data, []byte(keyCheck(key))), nil
}

// adoptSharedKey finds the fingerprint key the ledger shares with this
// gateway: sealed inside a root-signed enrollment of its key
// (`portcullis enroll`), else sealed to its box key on
// pc.meta.fpkey.gw.<id>.<digest> (earlier versions' enroll, or this
// gateway at an earlier start), else sealed to the root (when it holds the
// root key). A sealed box does not say who sealed it, and the plain
// subjects are open to anyone with the gateway NATS credentials (first
// write wins), so a key counts only if it matches the ledger's key check
// (check): a key nobody holding the ledger's key sealed cannot. The others
// are returned, named, in forged.
func adoptSharedKey(ctx context.Context, nc *nats.Conn, meta jetstream.Stream, id *identity, gatewayID, check string) (key fingerprint.Key, forged []string, err error) {
	boxPub, _ := trust.BoxKeys(id.signKey)
	try := func(where string, k fingerprint.Key, err error) bool {
		switch {
		case err != nil:
			forged = append(forged, fmt.Sprintf("%s: %v", where, err))
		case !hmac.Equal([]byte(keyCheck(k)), []byte(check)):
			forged = append(forged, where+": does not match the ledger's key check")
		default:
			key = k
			return true
		}
		return false
	}
	recs, err := readEnrollRecords(ctx, nc, meta, gatewayID, 0, trust.EnrollRecordsMax)
	if err != nil {
		return nil, nil, fmt.Errorf("enrollment records of %s: %w", gatewayID, err)
	}
	pub := id.signKey.Public().(ed25519.PublicKey)
	for _, r := range recs {
		e, err := trust.OpenStoredEnrollment(id.root.GetPublicKey(), r.Data)
		if err != nil || e.GetFingerprintKey() == nil || !bytes.Equal(e.GetPublicKey(), pub) || !bytes.Equal(e.GetBoxPublicKey(), boxPub[:]) {
			continue // not a root-signed enrollment of this key with a sealed key
		}
		k, err := openSealedKey(e.GetFingerprintKey(), id.signKey)
		if try(fmt.Sprintf("enrollment at seq %d", r.Seq), k, err) {
			return key, forged, nil
		}
	}
	if m, err := meta.GetLastMsgForSubject(ctx, sealedKeySubject(gatewayID, boxPub[:])); err == nil {
		k, err := openSealed(m.Data, id.signKey)
		if try(fmt.Sprintf("%s seq %d", sealedKeySubject(gatewayID, boxPub[:]), m.Sequence), k, err) {
			return key, forged, nil
		}
	}
	if id.rootKey == nil {
		return nil, forged, errors.New("no key sealed to this gateway and no root key")
	}
	m, err := meta.GetLastMsgForSubject(ctx, sealedKeyRoot)
	if err != nil {
		return nil, forged, fmt.Errorf("key sealed to the root: %w", err)
	}
	k, err := openSealed(m.Data, id.rootKey)
	if try(fmt.Sprintf("%s seq %d", sealedKeyRoot, m.Sequence), k, err) {
		return key, forged, nil
	}
	return nil, forged, errors.New("no key sealed to this gateway or to the root matches the ledger's key check")
}

func openSealedRoot(ctx context.Context, meta jetstream.Stream, rootKey ed25519.PrivateKey) (fingerprint.Key, error) {
	m, err := meta.GetLastMsgForSubject(ctx, sealedKeyRoot)
	if err != nil {
		return nil, err
	}
	return openSealed(m.Data, rootKey)
}

func openSealed(data []byte, priv ed25519.PrivateKey) (fingerprint.Key, error) {
	sk := new(pb.SealedKey)
	if err := proto.Unmarshal(data, sk); err != nil {
		return nil, fmt.Errorf("%w: sealed key: %v", trust.ErrBadRecord, err)
	}
	return openSealedKey(sk, priv)
}

func openSealedKey(sk *pb.SealedKey, priv ed25519.PrivateKey) (fingerprint.Key, error) {
	b, err := trust.OpenKey(sk, priv)
	if err != nil {
		return nil, err
	}
	return fingerprint.ParseKey(hex.EncodeToString(b))
}

func sealedKeySubject(gatewayID string, box []byte) string {
	if gatewayID == "" {
		return sealedKeyRoot
	}
	sum := sha256.Sum256(box)
	return sealedKeyPfx + gatewayID + "." + hex.EncodeToString(sum[:8])
}

// shareKey stores the key sealed to one box key (gatewayID "": the root's).
func shareKey(ctx context.Context, js jetstream.JetStream, key fingerprint.Key, gatewayID string, box []byte) error {
	sk, err := trust.SealKey(key, box)
	if err != nil {
		return err
	}
	b, err := proto.Marshal(sk)
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, sealedKeySubject(gatewayID, box), b, jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return nil // already shared with this key
	}
	return err
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

// LedgerKeys reads the root record and every enrollment it signed, for
// offline verification: gateway id → enrolled public keys. Forged
// enrollment records are skipped and counted.
func LedgerKeys(ctx context.Context, js jetstream.JetStream) (ed25519.PublicKey, map[string][]ed25519.PublicKey, int, error) {
	meta, err := js.Stream(ctx, metaStream)
	if err != nil {
		return nil, nil, 0, err
	}
	root, err := readRoot(ctx, meta)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("ledger root: %w", err)
	}
	recs, err := readRecords(ctx, meta, EnrollSubjectPfx+">")
	if err != nil {
		return nil, nil, 0, err
	}
	kr := trust.NewKeyring(root.GetPublicKey(), nil)
	for _, sr := range recs {
		_, _ = kr.Add(sr)
	}
	return root.GetPublicKey(), kr.All(), int(kr.Rejected()), nil
}
