package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/fingerprint"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/mcp"
	"github.com/portcullis-dev/portcullis/telemetry"
)

// streamDescriptions are the StreamConfig.Description of the ledger's
// streams, so `nats stream ls` and `nats stream info` say what each holds.
var streamDescriptions = map[string]string{
	ledger.ExecutionsStream: "Portcullis: execution events (protobuf portcullis.v1.Event, hash-chained and signed per subject) on pc.exec.<intent token>.<execution id>; read with `nats stream view --translate 'portcullis events decode'`",
	keeper.Stream:           "Portcullis: budget decisions (protobuf portcullis.v1.Event) on pc.budget.<account>; limit set, reserved, denied, settled, released",
	AuditStream:             "Portcullis: signed checkpoints over whole streams on pc.audit.<stream>",
	mcp.SessionsStream:      "Portcullis: agent sessions journal (protobuf portcullis.v1.Event) on pc.session.<token>: started, authorized, ended",
}

// validate checks the flags that need no I/O, before anything is written.
func (o Options) validate() error {
	if o.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if o.Listen == "" {
		return errors.New("--listen is required (HOST:PORT)")
	}
	if _, port, err := net.SplitHostPort(o.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--listen %q: port must be 0-65535", o.Listen)
	}
	if o.Replicas < 0 {
		return fmt.Errorf("--replicas %d: must be 0 (auto) or more", o.Replicas)
	}
	if o.ExecShards < 0 || o.ExecShards > ledger.MaxLanes {
		return fmt.Errorf("--exec-shards %d: must be 0 (the ledger's, or the default for a new one) to %d", o.ExecShards, ledger.MaxLanes)
	}
	if err := checkStaging(o.BatchStaging); err != nil {
		return err
	}
	if o.CheckpointEvery < 0 {
		return fmt.Errorf("--checkpoint-every %s: must not be negative", o.CheckpointEvery)
	}
	if o.FingerprintKey != "" {
		if _, err := fingerprint.ParseKey(o.FingerprintKey); err != nil {
			return fmt.Errorf("--fingerprint-key: %w", err)
		}
	}
	if o.StuckAfter < 0 {
		return fmt.Errorf("--projector-stuck-after %s: must not be negative", o.StuckAfter)
	}
	return nil
}

// watch hands the metrics and readiness what they read at scrape time.
func (g *Gateway) watch(o Options) {
	lag := func(stream string, last func(context.Context) (uint64, error)) telemetry.StreamLag {
		return func(ctx context.Context) (uint64, uint64, error) {
			seq, err := last(ctx)
			if err != nil {
				return 0, 0, err
			}
			m, err := g.Views.Mark(stream)
			if err != nil {
				return 0, 0, err
			}
			return seq, m.Seq, nil
		}
	}
	streams := map[string]telemetry.StreamLag{
		keeper.Stream: lag(keeper.Stream, g.budLog.LastSeq),
	}
	for k, l := range g.laneLogs {
		streams[ledger.LaneStream(k)] = lag(ledger.LaneStream(k), l.LastSeq)
	}
	sources := map[string]func() telemetry.SourceCounts{}
	for name, f := range g.feeds {
		sources[name] = func() telemetry.SourceCounts {
			n := f.Stats()
			return telemetry.SourceCounts{Fed: n.Fed, Read: n.Read, Reads: n.Reads}
		}
	}
	var replicas func() []telemetry.ReplicaCount
	if o.NatsMonitorURL != "" {
		g.replicas = newReplicaWatch(seedURLs(o.NatsMonitorURL), auditedStreams(g.Lanes), g.log)
		replicas = g.replicas.Replicas
	}
	g.Metrics.Watch(telemetry.LedgerState{
		Streams:         streams,
		Sources:         sources,
		Replicas:        replicas,
		ExecutionStates: g.Views.ExecutionStates,
		Accounts: func(fn func(name, currency string, limit, spent, held int64)) error {
			return g.Views.EachAccount(func(a *budget.Account) { fn(a.Name, a.Currency, a.Limit, a.Spent, a.Held) })
		},
	})
	conn := g.nats.conn
	g.Readiness = &telemetry.Readiness{
		Streams:    streams,
		StuckAfter: o.StuckAfter,
		Connected: func() error {
			if s := conn.Status(); s != nats.CONNECTED {
				return fmt.Errorf("connection %s", s)
			}
			return nil
		},
	}
}

// quarantined counts a quarantined message in the metrics, by a reason
// kind that keeps the label set small.
func (g *Gateway) quarantined(stream string, reason error) {
	g.Metrics.Quarantined(stream, quarantineKind(reason))
}

// quarantineKind names why a message was quarantined: unenrolled,
// signature, transition, undecodable or chain (hash, subject, link, and
// anything else that breaks the record's rules).
func quarantineKind(err error) string {
	var ite *ledger.IllegalTransitionError
	switch {
	case errors.Is(err, ledger.ErrUnenrolled):
		return "unenrolled"
	case errors.As(err, &ite):
		return "transition"
	case errors.Is(err, ledger.ErrUndecodable):
		return "undecodable"
	case errors.Is(err, ledger.ErrBadSignature):
		return "signature"
	}
	return "chain"
}
