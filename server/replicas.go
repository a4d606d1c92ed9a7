package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/portcullis-dev/portcullis/telemetry"
)

// Every replica of a ledger stream holds every message the stream ever
// took: the streams deny delete and purge and have no limits, so a
// replica that counts deleted messages lost them to its store. The fault
// campaign found such a replica (docs/faults.md, "A corrupted follower
// stays corrupted"): a block cut at a flipped record leaves a deleted
// range while the replica's first and last sequence stay the leader's,
// and nats-server neither repairs nor reports it. Read through the leader
// the ledger looks whole; if that replica becomes the leader, the events
// are gone for every reader. With --nats-monitor-url the gateway reads
// every server's /jsz every replicaCheckEvery, logs such a replica as an
// error with the remedy, and serves the counts as
// portcullis_stream_replica_missing_messages.
const (
	replicaCheckEvery = time.Minute
	replicaFirstCheck = 10 * time.Second // after start: a restarted node rebuilds first
	jszMaxBytes       = 64 << 20         // /jsz with streams, every account
)

// replicaCount is one server's copy of one ledger stream.
type replicaCount struct {
	Server, Account, Stream string
	AccountID               string // the account's directory in the store (its name unless tagged)
	RaftGroup               string // the copy's raft group (its directory under $SYS/_js_)
	Messages, LastSeq       uint64
	// Deleted counts the messages the copy is missing between its first
	// and last sequence; Lost the ones nats-server itself recorded as lost
	// from a bad block.
	Deleted, Lost uint64
}

// remedy says how to have nats-server copy the stream to this server
// again. A 3-node cluster has no spare server, so `peer-remove` fails
// there ("peer remap failed"); a server that starts without its copy
// catches up from the leader (docs/nats.md, "A replica that lost
// messages").
func (r replicaCount) remedy() string {
	if r.RaftGroup == "" {
		return fmt.Sprintf("server %s holds the only copy (one replica): the messages are gone from the stream; restore its store from a backup (`portcullis audit verify` checks the record against its signed checkpoints)", r.Server)
	}
	return fmt.Sprintf("stop server %s, delete its copy of the stream (<store_dir>/jetstream/%s/streams/%s and <store_dir>/jetstream/$SYS/_js_/%s), start it again: it copies the stream from the leader; with a spare server in the cluster, `nats stream cluster peer-remove %s %s` instead",
		r.Server, r.AccountID, r.Stream, r.RaftGroup, r.Stream, r.Server)
}

func (r replicaCount) key() string { return r.Server + "/" + r.Account + "/" + r.Stream }

// missing is how many messages this copy lacks.
func (r replicaCount) missing() uint64 { return r.Deleted + r.Lost }

// readReplicas reads one server's name and its copies of the named
// streams (any account) from its monitoring endpoint.
func readReplicas(ctx context.Context, monitorURL string, streams []string) (string, []replicaCount, error) {
	base := strings.TrimSuffix(monitorURL, "/")
	name, err := serverName(ctx, base)
	if err != nil {
		return "", nil, err
	}
	var jsz struct {
		Accounts []struct {
			Name    string `json:"name"`
			ID      string `json:"id"`
			Streams []struct {
				Name      string `json:"name"`
				RaftGroup string `json:"stream_raft_group"`
				State     struct {
					Messages   uint64 `json:"messages"`
					LastSeq    uint64 `json:"last_seq"`
					NumDeleted uint64 `json:"num_deleted"`
					Lost       *struct {
						Msgs []uint64 `json:"msgs"`
					} `json:"lost"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := getJSON(ctx, base+"/jsz?accounts=true&streams=true&raft=true", jszMaxBytes, &jsz); err != nil {
		return "", nil, err
	}
	var out []replicaCount
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if !slices.Contains(streams, s.Name) {
				continue
			}
			r := replicaCount{Server: name, Account: a.Name, AccountID: a.ID, Stream: s.Name, RaftGroup: s.RaftGroup, Messages: s.State.Messages, LastSeq: s.State.LastSeq, Deleted: s.State.NumDeleted}
			if s.State.Lost != nil {
				r.Lost = uint64(len(s.State.Lost.Msgs))
			}
			out = append(out, r)
		}
	}
	return name, out, nil
}

// serverName is the server_name in a server's /varz.
func serverName(ctx context.Context, base string) (string, error) {
	var v struct {
		Name string `json:"server_name"`
	}
	if err := getJSON(ctx, base+"/varz", 1<<20, &v); err != nil {
		return "", err
	}
	return v.Name, nil
}

func getJSON(ctx context.Context, u string, limit int64, v any) error {
	ctx, cancel := context.WithTimeout(ctx, monitorWaitMax)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// replicaWatch keeps the latest reading of every server's copies and
// reports each copy that lacks messages once per count.
type replicaWatch struct {
	urls    []string
	streams []string
	log     *slog.Logger

	mu       sync.Mutex
	counts   map[string]replicaCount // by server/account/stream
	failed   map[string]bool         // monitoring URLs the last check could not read
	reported map[string]uint64       // missing count last logged, by copy
}

func newReplicaWatch(urls, streams []string, lg *slog.Logger) *replicaWatch {
	return &replicaWatch{urls: urls, streams: streams, log: lg, counts: map[string]replicaCount{}, failed: map[string]bool{}, reported: map[string]uint64{}}
}

func (w *replicaWatch) run(ctx context.Context) {
	t := time.NewTimer(replicaFirstCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.check(ctx)
		t.Reset(replicaCheckEvery)
	}
}

// check reads every server once. A server's reading replaces its last
// one: a copy the server no longer holds (its replica moved to another
// server) is no longer counted.
func (w *replicaWatch) check(ctx context.Context) {
	for _, u := range w.urls {
		name, rs, err := readReplicas(ctx, u, w.streams)
		w.mu.Lock()
		if err != nil {
			if !w.failed[u] {
				w.log.Warn("cannot read a NATS server's stream replicas (the check that every replica holds every ledger message)", "monitor", u, "err", err)
			}
			w.failed[u] = true
			w.mu.Unlock()
			continue
		}
		w.failed[u] = false
		held := map[string]bool{}
		for _, r := range rs {
			held[r.key()] = true
		}
		for key, r := range w.counts {
			if r.Server == name && !held[key] {
				delete(w.counts, key)
				delete(w.reported, key)
			}
		}
		for _, r := range rs {
			key := r.key()
			w.counts[key] = r
			if r.missing() > 0 && w.reported[key] != r.missing() {
				w.log.Error("a replica of a ledger stream is missing messages: its store lost them (the streams deny delete and purge); read through the leader the ledger looks whole, but if this replica becomes the stream's leader those events are gone. Rebuild it from the leader",
					"stream", r.Stream, "server", r.Server, "account", r.Account, "deleted", r.Deleted, "lost", r.Lost, "messages", r.Messages, "last_seq", r.LastSeq,
					"remedy", r.remedy())
			}
			w.reported[key] = r.missing()
		}
		w.mu.Unlock()
	}
}

// Replicas is the latest reading, for the metrics.
func (w *replicaWatch) Replicas() []telemetry.ReplicaCount {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]telemetry.ReplicaCount, 0, len(w.counts))
	for _, r := range w.counts {
		out = append(out, telemetry.ReplicaCount{Server: r.Server, Account: r.Account, Stream: r.Stream, Missing: r.missing()})
	}
	return out
}
