package audit

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/portcullis-dev/portcullis/projector"
)

// ExportSource feeds one stream of an export directory to a projector, for
// `portcullis replay`.
type ExportSource struct {
	Dir    string
	Stream string
}

var _ projector.Source = ExportSource{}

func (s ExportSource) manifest() (StreamExport, error) {
	m, err := ReadManifest(s.Dir)
	if err != nil {
		return StreamExport{}, err
	}
	return m.Streams[s.Stream], nil
}

// ReadManifest reads an export directory's manifest.
func ReadManifest(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return Manifest{}, fmt.Errorf("export manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("export manifest: %w", err)
	}
	return m, nil
}

// LastSeq is the stream's last sequence in the export (0: not exported).
func (s ExportSource) LastSeq(context.Context) (uint64, error) {
	se, err := s.manifest()
	return se.LastSeq, err
}

// Tail delivers the exported events from sequence from on, in batches of
// up to projector.MaxFold, then returns.
func (s ExportSource) Tail(ctx context.Context, from uint64, deliver func([]projector.Entry) error) error {
	se, err := s.manifest()
	if err != nil || se.File == "" {
		return err
	}
	f, err := os.Open(filepath.Join(s.Dir, se.File))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
	batch := make([]projector.Entry, 0, projector.MaxFold)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("%s: %w", se.File, err)
		}
		if l.Seq < from {
			continue
		}
		batch = append(batch, projector.Entry{Seq: l.Seq, Subject: l.Subject, Data: l.Data, Time: l.Time})
		if len(batch) == projector.MaxFold {
			if err := deliver(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return deliver(batch)
	}
	return nil
}

// RecordSource feeds records held in memory (an export's enrollment
// records, LedgerTrust.EnrollmentRecords) to a projector, in sequence
// order, for `portcullis replay`.
type RecordSource []Record

var _ projector.Source = RecordSource(nil)

// LastSeq is the last record's sequence (0: none).
func (s RecordSource) LastSeq(context.Context) (uint64, error) {
	var last uint64
	for _, r := range s {
		last = max(last, r.Seq)
	}
	return last, nil
}

// Tail delivers the records from sequence from on, in sequence order and
// batches of up to projector.MaxFold, then returns.
func (s RecordSource) Tail(ctx context.Context, from uint64, deliver func([]projector.Entry) error) error {
	rs := slices.SortedFunc(slices.Values(s), func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	batch := make([]projector.Entry, 0, min(len(rs), projector.MaxFold))
	for _, r := range rs {
		if r.Seq < from {
			continue
		}
		batch = append(batch, projector.Entry{Seq: r.Seq, Subject: r.Subject, Data: r.Data})
		if len(batch) == projector.MaxFold {
			if err := deliver(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		return deliver(batch)
	}
	return nil
}
