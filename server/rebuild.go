package server

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/trust"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
)

// Rebuild throws the views away and folds them again from the streams,
// reporting progress. A gateway running on the same data directory is
// refused: the rebuild is folded apart and swapped in for the views
// directory, which would pull the live views from under that gateway.
func Rebuild(ctx context.Context, o Options, progress func(applied, total uint64)) error {
	if err := viewsNotInUse(filepath.Join(o.DataDir, "views")); err != nil {
		return err
	}
	n, lg, err := openForTool(o)
	if err != nil {
		return err
	}
	defer n.close()
	lanes, err := ledgerLanes(ctx, n.js)
	if err != nil {
		return err
	}
	var streams []jetstream.Stream
	for _, name := range lanes.Streams() {
		s, err := n.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		streams = append(streams, s)
	}
	dir := filepath.Join(o.DataDir, "views")
	tmp := dir + ".rebuild"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	v, err := pebbleviews.Open(tmp)
	if err != nil {
		return err
	}
	keys, err := ledgerKeyring(ctx, n.js, o)
	if err != nil {
		v.Close()
		return err
	}
	for k, s := range streams {
		p := projector.New(ledger.LaneStream(k), ljs.Source{Stream: s}, v, lg)
		p.SetLane(k, lanes)
		p.SetKeys(keys)
		prog := progress
		if k > 0 {
			prog = nil // progress reports lane 0, the executions stream
		}
		if err := p.CatchUp(ctx, prog); err != nil {
			v.Close()
			return fmt.Errorf("rebuild %s: %w", ledger.LaneStream(k), err)
		}
	}
	if bs, err := n.js.Stream(ctx, keeper.Stream); err == nil {
		bp := projector.NewBudget(ljs.Source{Stream: bs}, v, lg)
		bp.SetKeys(keys)
		if err := bp.CatchUp(ctx, nil); err != nil {
			v.Close()
			return fmt.Errorf("rebuild budget views: %w", err)
		}
	}
	if ss, err := n.js.Stream(ctx, mcp.SessionsStream); err == nil {
		sp := projector.NewJournal(mcp.SessionsStream, ljs.Source{Stream: ss}, v, lg)
		sp.SetKeys(keys)
		if err := sp.CatchUp(ctx, nil); err != nil {
			v.Close()
			return fmt.Errorf("rebuild sessions digest: %w", err)
		}
	}
	if as, err := n.js.Stream(ctx, AuditStream); err == nil {
		meta, err := n.js.Stream(ctx, metaStream)
		if err != nil {
			v.Close()
			return err
		}
		cp, en := trustProjectors(as, meta, v, keys, keys.Root(), lg)
		for _, p := range []*projector.Projector{cp, en} {
			if err := p.CatchUp(ctx, nil); err != nil {
				v.Close()
				return fmt.Errorf("rebuild quarantine of checkpoints and enrollments: %w", err)
			}
		}
	}
	if err := v.Close(); err != nil {
		return err
	}
	// Swap only a complete rebuild in; a failed one leaves the old views.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// Replay folds the record into fresh views in outDir, from an export
// directory (from != "") or the live ledger, reporting progress per
// stream; it returns the number of events folded. Signatures are checked
// against the record's own enrollments (pin them with audit verify
// --trusted-keys); what fails is quarantined, as on a gateway.
func Replay(ctx context.Context, o Options, from, outDir string, progress func(stream string, applied, total uint64)) (uint64, error) {
	if _, err := os.Stat(outDir); err == nil {
		return 0, fmt.Errorf("%s exists: replay builds fresh views", outDir)
	}
	v, err := pebbleviews.Open(outDir)
	if err != nil {
		return 0, err
	}
	defer v.Close()
	sources := map[string]projector.Source{}
	var keys ledger.Keys
	var root ed25519.PublicKey
	var enrolled projector.Source // the enrollment records
	lanes := ledger.Lanes(1)
	if from != "" {
		man, err := audit.ReadManifest(from)
		if err != nil {
			return 0, err
		}
		a, err := man.Trust.UnpinnedAnchor()
		if err != nil {
			return 0, fmt.Errorf("replay %s: %w", from, err)
		}
		keys, root = keyMap(a.Keys(man.Trust)), a.Root
		enrolled = audit.RecordSource(man.Trust.EnrollmentRecords)
		if _, ok := man.Streams[AuditStream]; ok {
			sources[AuditStream] = audit.ExportSource{Dir: from, Stream: AuditStream}
		}
		if lanes, err = exportLanes(man.Trust); err != nil {
			return 0, fmt.Errorf("replay %s: %w", from, err)
		}
		for name := range man.Streams {
			if _, ok := ledger.StreamLane(name); ok {
				sources[name] = audit.ExportSource{Dir: from, Stream: name}
			}
		}
		sources[keeper.Stream] = audit.ExportSource{Dir: from, Stream: keeper.Stream}
		sources[mcp.SessionsStream] = audit.ExportSource{Dir: from, Stream: mcp.SessionsStream}
	} else {
		n, _, err := openForTool(o)
		if err != nil {
			return 0, err
		}
		defer n.close()
		kr, err := ledgerKeyring(ctx, n.js, Options{})
		if err != nil {
			return 0, err
		}
		keys, root = kr, kr.Root()
		if meta, err := n.js.Stream(ctx, metaStream); err == nil {
			enrolled = enrollmentSource(meta)
		}
		if lanes, err = ledgerLanes(ctx, n.js); err != nil {
			return 0, err
		}
		for _, name := range append(lanes.Streams(), keeper.Stream, mcp.SessionsStream, AuditStream) {
			if s, err := n.js.Stream(ctx, name); err == nil {
				sources[name] = ljs.Source{Stream: s}
			}
		}
	}
	if enrolled != nil {
		sources[metaStream] = enrolled
	}
	var total uint64
	for _, name := range append(lanes.Streams(), keeper.Stream, mcp.SessionsStream, AuditStream, metaStream) {
		src, ok := sources[name]
		if !ok {
			continue
		}
		var p *projector.Projector
		switch name {
		case keeper.Stream:
			p = projector.NewBudget(src, v, nil)
		case mcp.SessionsStream:
			p = projector.NewJournal(name, src, v, nil)
		case AuditStream:
			p = projector.NewCheckpoints(name, CheckpointSubject, src, v, nil)
		case metaStream:
			p = projector.NewEnrollments(name, src, v, root, nil)
		default:
			p = projector.New(name, src, v, nil)
			k, _ := ledger.StreamLane(name)
			p.SetLane(k, lanes)
		}
		p.SetKeys(keys)
		var done uint64
		err := p.CatchUp(ctx, func(applied, all uint64) {
			done = applied
			if progress != nil {
				progress(name, applied, all)
			}
		})
		if err != nil {
			return total, fmt.Errorf("replay %s: %w", name, err)
		}
		if name != metaStream { // its sequences are not its records' count
			total += done
		}
	}
	return total, nil
}

// ledgerKeyring is the keyring of the ledger's enrolled gateways, for an
// operator tool: the root from the meta stream, pinned against the data
// directory's root.pub (or --root-public-key) when there is one.
func ledgerKeyring(ctx context.Context, js jetstream.JetStream, o Options) (*trust.Keyring, error) {
	meta, err := js.Stream(ctx, metaStream)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoLedger, err)
	}
	root, err := readRoot(ctx, meta)
	if err != nil {
		return nil, fmt.Errorf("ledger root: %w", err)
	}
	if err := pinRoot(o, root.GetPublicKey()); err != nil {
		return nil, err
	}
	return trust.NewKeyring(root.GetPublicKey(), metaEnrollments(js.Conn(), meta)), nil
}

// exportLanes is the lane count the root record of an export holds.
func exportLanes(t audit.LedgerTrust) (ledger.Lanes, error) {
	sr := new(pb.SignedRecord)
	if err := proto.Unmarshal(t.Root, sr); err != nil {
		return 0, fmt.Errorf("root record: %w", err)
	}
	root, err := trust.OpenRoot(sr)
	if err != nil {
		return 0, err
	}
	return rootLanes(root), nil
}

// viewsNotInUse refuses views a running gateway holds (Pebble's lock in
// the directory); views that do not exist yet are not in use.
func viewsNotInUse(dir string) error {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	v, err := pebbleviews.Open(dir)
	if err != nil {
		return fmt.Errorf("the views in %s are in use (is a gateway running on this data directory? stop it before rebuilding its views): %w", dir, err)
	}
	return v.Close()
}
