package audit

import (
	"bufio"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Manifest describes an export directory.
type Manifest struct {
	ExportedAt time.Time `json:"exported_at"`
	// Filter describes a partial export (subject filter, time range); a
	// partial export is for analysis and is not verified.
	Filter  string                  `json:"filter,omitempty"`
	Streams map[string]StreamExport `json:"streams"`
	// Gateways lists the enrolled keys (id → hex Ed25519 public keys), for
	// analysts; verification uses Trust (or --trusted-keys), not this.
	Gateways map[string][]string `json:"gateways"`
	// Trust is the ledger's root record and stored enrollment records.
	Trust LedgerTrust `json:"trust"`
	// SignedBy (hex Ed25519 public key) signed the manifest: Signature is
	// over the manifest's JSON with the signature left empty.
	SignedBy  string `json:"signed_by,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

// signedBytes is what a manifest's signature covers.
func (m Manifest) signedBytes() []byte {
	m.Signature = nil
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal manifest: %v", err)) // plain values: cannot fail
	}
	return b
}

// StreamExport is one stream's file in an export.
type StreamExport struct {
	File        string `json:"file"`
	Events      int    `json:"events"`
	LastSeq     uint64 `json:"last_seq"`
	Checkpoints bool   `json:"checkpoints,omitempty"` // the stream holds checkpoints over the others
}

// Line is one exported event: the stored bytes (what is verified) and,
// for analysts, the decoded event.
type Line struct {
	Stream  string          `json:"stream"`
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Time    time.Time       `json:"time"`
	Data    []byte          `json:"data"`
	Event   json.RawMessage `json:"event,omitempty"`
}

// Writer writes an export directory.
type Writer struct {
	dir   string
	files map[string]*bufio.Writer
	fds   map[string]*os.File
	man   Manifest
	sign  ed25519.PrivateKey
}

// NewWriter creates dir (which must not hold an export yet). The trust
// material is copied into the manifest; sign (nil: unsigned) signs it.
func NewWriter(dir string, t LedgerTrust, sign ed25519.PrivateKey) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return nil, fmt.Errorf("%s already holds an export", dir)
	}
	w := &Writer{dir: dir, files: map[string]*bufio.Writer{}, fds: map[string]*os.File{}, sign: sign,
		man: Manifest{ExportedAt: time.Now().UTC(), Streams: map[string]StreamExport{}, Gateways: map[string][]string{}, Trust: t}}
	if a, err := t.UnpinnedAnchor(); err == nil {
		for id, ks := range a.Keys(t) {
			for _, k := range ks {
				w.man.Gateways[id] = append(w.man.Gateways[id], hex.EncodeToString(k))
			}
		}
	}
	return w, nil
}

// SetFilter marks the export as partial.
func (w *Writer) SetFilter(f string) { w.man.Filter = f }

// Add writes one record.
func (w *Writer) Add(r Record, at time.Time) error {
	bw, ok := w.files[r.Stream]
	if !ok {
		name := r.Stream + ".jsonl"
		f, err := os.Create(filepath.Join(w.dir, name))
		if err != nil {
			return err
		}
		w.fds[r.Stream], bw = f, bufio.NewWriter(f)
		w.files[r.Stream] = bw
		w.man.Streams[r.Stream] = StreamExport{File: name, Checkpoints: isCheckpoints(r.Data)}
	}
	l := Line{Stream: r.Stream, Seq: r.Seq, Subject: r.Subject, Time: at.UTC(), Data: r.Data}
	ev := new(pb.Event)
	if proto.Unmarshal(r.Data, ev) == nil {
		l.Event, _ = protojson.Marshal(ev)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	bw.Write(b)
	bw.WriteByte('\n')
	se := w.man.Streams[r.Stream]
	se.Events++
	se.LastSeq = r.Seq
	w.man.Streams[r.Stream] = se
	return nil
}

// Close flushes the files and writes the manifest last.
func (w *Writer) Close() error {
	for s, bw := range w.files {
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := w.fds[s].Close(); err != nil {
			return err
		}
	}
	if w.sign != nil {
		w.man.SignedBy = hex.EncodeToString(w.sign.Public().(ed25519.PublicKey))
		w.man.Signature = ed25519.Sign(w.sign, w.man.signedBytes())
	}
	b, err := json.MarshalIndent(w.man, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(w.dir, "manifest.json"), b, 0o644)
}

// VerifyOptions pin what a verification trusts.
type VerifyOptions struct {
	// TrustedKeys is a --trusted-keys file ("" trusts the record's own root record).
	TrustedKeys string
	// TrustedCheckpoint is a file saved by `portcullis audit checkpoint`.
	TrustedCheckpoint string
}

// NewAnchoredVerifier resolves the keys a verification counts from the
// options and the record's trust material, and pins trusted checkpoints.
func NewAnchoredVerifier(t LedgerTrust, o VerifyOptions) (*Verifier, Anchor, error) {
	var a Anchor
	var err error
	if o.TrustedKeys != "" {
		a, err = LoadTrustedKeys(o.TrustedKeys)
	} else {
		a, err = t.UnpinnedAnchor()
	}
	if err != nil {
		return nil, Anchor{}, err
	}
	keys := a.Keys(t)
	v := NewVerifier(keys)
	v.SetAnchored(a.Pinned)
	v.checkEnrollments(a, t)
	if o.TrustedCheckpoint != "" {
		cps, err := LoadCheckpoints(o.TrustedCheckpoint, keys)
		if err != nil {
			return nil, Anchor{}, err
		}
		for _, r := range cps {
			v.Pin(r)
		}
	}
	return v, a, nil
}

// ReadExport verifies an export directory: the gateway keys from its
// manifest, every stream file in order, and each file's event count and
// last sequence against the manifest (a truncated file is a failure).
//
// The decoded event of each line must equal the stored bytes it comes with;
// the keys come from o.TrustedKeys when given (and then the manifest must be
// signed by a trusted key), else from the export's own root record.
func ReadExport(dir string, o VerifyOptions) (Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return Report{}, fmt.Errorf("export manifest: %w", err)
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return Report{}, fmt.Errorf("export manifest: %w", err)
	}
	if man.Filter != "" {
		return Report{}, fmt.Errorf("%s is a partial export (%s): verify a full export", dir, man.Filter)
	}
	if len(man.Streams) == 0 {
		return Report{}, fmt.Errorf("%s: the export holds no ledger (no streams)", dir)
	}
	for name, se := range man.Streams {
		if !filepath.IsLocal(se.File) {
			return Report{}, fmt.Errorf("export stream %s: file %q is not inside the export directory", name, se.File)
		}
	}
	v, a, err := NewAnchoredVerifier(man.Trust, o)
	if err != nil {
		return Report{}, err
	}
	if a.Pinned {
		signer, err := hex.DecodeString(man.SignedBy)
		switch {
		case err != nil || len(signer) != ed25519.PublicKeySize || len(man.Signature) == 0:
			v.failures = append(v.failures, Failure{Reason: "the manifest is not signed"})
		case !ed25519.Verify(signer, man.signedBytes(), man.Signature):
			v.failures = append(v.failures, Failure{Reason: "the manifest's signature does not verify (the manifest was edited)"})
		case !a.trusts(signer, v.keys):
			v.failures = append(v.failures, Failure{Reason: "the manifest is signed by a key that is not trusted"})
		}
	} else if len(man.Signature) > 0 {
		signer, err := hex.DecodeString(man.SignedBy)
		if err != nil || len(signer) != ed25519.PublicKeySize || !ed25519.Verify(signer, man.signedBytes(), man.Signature) {
			v.failures = append(v.failures, Failure{Reason: "the manifest's signature does not verify (the manifest was edited)"})
		}
	}
	names := make([]string, 0, len(man.Streams))
	for name := range man.Streams {
		names = append(names, name)
	}
	// Checkpoints last: they name digests of the other streams.
	sort.Slice(names, func(i, j int) bool {
		ci, cj := man.Streams[names[i]].Checkpoints, man.Streams[names[j]].Checkpoints
		if ci != cj {
			return cj
		}
		return names[i] < names[j]
	})
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Report{}, fmt.Errorf("export directory: %w", err)
	}
	defer root.Close()
	for _, name := range names {
		se := man.Streams[name]
		// The manifest comes from outside: a stream's file must lie inside
		// the export directory (no "../", no absolute path, no symlink out).
		f, err := root.Open(se.File)
		if err != nil {
			return Report{}, fmt.Errorf("export stream %s: %w", name, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
		n, last := 0, uint64(0)
		for line := 1; sc.Scan(); line++ {
			var l Line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				v.failures = append(v.failures, Failure{Stream: name, Reason: fmt.Sprintf("%s:%d: unreadable line: %v", se.File, line, err)})
				continue
			}
			r := Record{Stream: name, Seq: l.Seq, Subject: l.Subject, Data: l.Data}
			if len(l.Event) > 0 && !decodedMatches(l) {
				v.fail(r, "the decoded event in the export line differs from the stored, signed bytes (edited)")
			}
			v.Add(r)
			n, last = n+1, l.Seq
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return Report{}, err
		}
		if n != se.Events || last != se.LastSeq {
			v.failures = append(v.failures, Failure{Stream: name, Seq: last,
				Reason: fmt.Sprintf("the file holds %d events up to sequence %d; the manifest says %d up to %d (truncated or extended)", n, last, se.Events, se.LastSeq)})
		}
	}
	return v.Report(), nil
}

// decodedMatches reports whether a line's decoded event says what its
// stored bytes say.
func decodedMatches(l Line) bool {
	stored, decoded := new(pb.Event), new(pb.Event)
	if proto.Unmarshal(l.Data, stored) != nil {
		return false
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(l.Event, decoded); err != nil {
		return false
	}
	return proto.Equal(stored, decoded)
}

func isCheckpoints(data []byte) bool {
	ev := new(pb.Event)
	return proto.Unmarshal(data, ev) == nil && ev.GetCheckpoint() != nil
}

// SubjectMatches reports whether a NATS subject matches a filter with
// "*" (one token) and ">" (the rest) wildcards.
func SubjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}
