package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// DefaultExecShards is how many execution lanes (streams) a NEW ledger
// gets when --exec-shards is not given. An existing ledger keeps the count
// recorded in its root (none recorded: one).
const DefaultExecShards = 1

// rootLanes is the lane count a ledger's root records (0: one lane).
func rootLanes(r *pb.RootIdentity) ledger.Lanes { return ledger.Lanes(r.GetExecutionLanes()) }

// newLedgerLanes is the lane count a new ledger records: the flag, else
// the default.
func newLedgerLanes(o Options) ledger.Lanes {
	if o.ExecShards > 0 {
		return ledger.Lanes(o.ExecShards)
	}
	return DefaultExecShards
}

// checkLanes refuses a --exec-shards that differs from what the ledger
// recorded at its creation (the count is fixed: an intent's lane is its
// token's hash modulo the count).
func checkLanes(o Options, have ledger.Lanes) error {
	if o.ExecShards > 0 && o.ExecShards != have.Count() {
		return fmt.Errorf("--exec-shards %d: this ledger was created with %d execution shard(s), fixed for its life; omit the flag or give %d", o.ExecShards, have.Count(), have.Count())
	}
	return nil
}

// laneConfigs are the stream configurations of lanes 1..n-1 (lane 0, the
// executions stream, is in streamConfigs).
func laneConfigs(replicas int, n ledger.Lanes) []jetstream.StreamConfig {
	var out []jetstream.StreamConfig
	for k := 1; k < n.Count(); k++ {
		out = append(out, laneSpec(k, replicas).Config())
	}
	return out
}

func laneSpec(k, replicas int) ljs.StreamSpec {
	return ljs.StreamSpec{Name: ledger.LaneStream(k), Description: laneDescription(k), Subjects: ledger.LaneSubjects(k), Replicas: replicas}
}

func laneDescription(k int) string {
	if k == 0 {
		return streamDescriptions[ledger.ExecutionsStream]
	}
	return fmt.Sprintf("Portcullis: execution events of lane %d (protobuf portcullis.v1.Event, hash-chained and signed per subject) on %s<intent token>.<execution id>; read with `nats stream view --translate 'portcullis events decode'`", k, ledger.LanePrefix(k))
}

// ensureLanes creates or updates the streams of lanes 1..n-1, as
// ensureStreams does the others (admin on the embedded server).
func (n *natsConn) ensureLanes(ctx context.Context, replicas int, lanes ledger.Lanes, lg *slog.Logger) error {
	cfgs := laneConfigs(replicas, lanes)
	if len(cfgs) == 0 {
		return nil
	}
	if n.server != nil {
		if c := n.server.JetStreamConfig(); c != nil && c.SyncAlways {
			RaiseProcsForFsync(lg) // several streams fsync here at once
		}
	}
	js := n.js
	if n.server != nil && n.role != natsauth.Admin {
		nc, err := n.connectEmbedded(natsauth.Admin, lg)
		if err != nil {
			return err
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return err
		}
	}
	var streams []jetstream.Stream
	for _, cfg := range cfgs {
		s, err := ljs.EnsureConfig(ctx, js, cfg, lg)
		if err != nil {
			return fmt.Errorf("execution shard stream %s (on an outside cluster, run `portcullis streams --exec-shards %d` as admin first): %w", cfg.Name, lanes.Count(), err)
		}
		streams = append(streams, s)
	}
	return boundConsumers(ctx, js, streams, n.admin(), lg)
}

// ledgerLanes reads the lane count from the ledger's root record (an
// operator tool; no root yet: ErrNoLedger).
func ledgerLanes(ctx context.Context, js jetstream.JetStream) (ledger.Lanes, error) {
	meta, err := js.Stream(ctx, metaStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, fmt.Errorf("%w: %v", ErrNoLedger, err)
	}
	if err != nil {
		return 0, fmt.Errorf("meta stream: %w", err)
	}
	root, err := readRoot(ctx, meta)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, fmt.Errorf("%w: the meta stream has no root record", ErrNoLedger)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger root: %w", err)
	}
	return rootLanes(root), nil
}

// sealedStreams are the streams a gateway of a ledger of n lanes seals.
func sealedStreams(n ledger.Lanes) []string {
	return append(n.Streams(), keeper.Stream, mcp.SessionsStream)
}

// auditedStreams are the streams of the record of a ledger of n lanes,
// checkpoints last.
func auditedStreams(n ledger.Lanes) []string { return append(sealedStreams(n), AuditStream) }

// LedgerLanes is the execution lane count of the ledger on o (for tools
// and tests): read from its root record.
func LedgerLanes(ctx context.Context, o Options) (ledger.Lanes, error) {
	n, _, err := openForTool(o)
	if err != nil {
		return 0, err
	}
	defer n.close()
	return ledgerLanes(ctx, n.js)
}

// laneStreams are the streams of the gateway's lanes, lane k at index k.
func (g *Gateway) laneStreams() []jetstream.Stream {
	out := make([]jetstream.Stream, len(g.laneLogs))
	for k, l := range g.laneLogs {
		out[k] = l.Stream()
	}
	return out
}

// TimelineQuery selects what ReadTimeline reads.
type TimelineQuery struct {
	Lane        int    // -1: every lane
	ExecutionID string // "": every execution
}

// ReadTimeline reads the execution events of the ledger on o, every lane
// (or one) up to its last sequence when called, merged into one sequence
// by event time: each lane in its own stream order, the lanes interleaved
// by the events' time_unix_nano (ties: lower lane first). An undecodable
// message is delivered at its stored time with a nil event.
func ReadTimeline(ctx context.Context, o Options, q TimelineQuery, deliver func(r audit.Record, at time.Time, ev *pb.Event) error) error {
	n, _, err := openForTool(o)
	if err != nil {
		return err
	}
	defer n.close()
	lanes, err := ledgerLanes(ctx, n.js)
	if err != nil {
		return err
	}
	if q.Lane >= lanes.Count() {
		return fmt.Errorf("%w: shard %d: the ledger has %d", ledger.ErrInvalid, q.Lane, lanes.Count())
	}
	if q.ExecutionID != "" {
		if err := ledger.ValidateExecutionID(q.ExecutionID); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type item struct {
		r  audit.Record
		at time.Time
		ev *pb.Event
	}
	var feeds []chan item
	errs := make(chan error, lanes.Count())
	for k, name := range lanes.Streams() {
		if q.Lane >= 0 && k != q.Lane {
			continue
		}
		s, err := n.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		last, err := ljs.Source{Stream: s}.LastSeq(ctx)
		if err != nil {
			return err
		}
		ch := make(chan item, timelineBuffer)
		feeds = append(feeds, ch)
		go func() {
			defer close(ch)
			errs <- ljs.Source{Stream: s}.ReadUpTo(ctx, last, func(e projector.Entry) error {
				if q.ExecutionID != "" && !strings.HasSuffix(e.Subject, "."+q.ExecutionID) {
					return nil
				}
				it := item{r: audit.Record{Stream: name, Seq: e.Seq, Subject: e.Subject, Data: e.Data}, at: e.Time}
				if ev := new(pb.Event); proto.Unmarshal(e.Data, ev) == nil {
					it.ev = ev
					if ev.GetTimeUnixNano() != 0 {
						it.at = time.Unix(0, ev.GetTimeUnixNano())
					}
				}
				select {
				case ch <- it:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	heads := make([]*item, len(feeds))
	next := func(k int) {
		if it, ok := <-feeds[k]; ok {
			heads[k] = &it
		} else {
			heads[k] = nil
		}
	}
	for k := range feeds {
		next(k)
	}
	for {
		best := -1
		for k, h := range heads {
			if h != nil && (best < 0 || h.at.Before(heads[best].at)) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		h := heads[best]
		if err := deliver(h.r, h.at, h.ev); err != nil {
			return err
		}
		next(best)
	}
	for range feeds {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// timelineBuffer is how many events each lane's reader may read ahead of
// the merge.
const timelineBuffer = 256
