// Package benchkit holds the parts the benchmarks of test/ and the
// side-by-side suite (internal/bench) share: the raw JetStream ceiling
// measured the way the ledger uses it, the HTTP target of tools/call, and
// an MCP server that calls that target directly.
package benchkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	ledgerjs "github.com/portcullis-dev/portcullis/ledger/jetstream"
)

// Limits of the raw ceiling's committer (the ledger's, see
// ledger/jetstream/committer.go).
const (
	// RawPayload is the baselines' bytes per decision (the Postgres
	// table's event row, Redis's value): an idempotency row's digest,
	// status and a short answer.
	RawPayload = 300
	// RawEvent is the raw ceiling's bytes per message: the data of one
	// ACCEPTED event of the suite's Begin as the ledger stores it (934 at
	// a group of one; a group's audit path adds 32 per level).
	RawEvent    = 934
	rawMaxBatch = 1000 // the server's atomic batch limit
	rawWorkers  = 2    // batches in flight per stream, as the ledger's committer
	rawAckWait  = 10 * time.Second
)

// Mode is how the ceiling's callers reach the stream.
type Mode string

const (
	// Plain: every caller sends its own compare-and-set publish.
	Plain Mode = "plain"
	// Grouped: each stream's committer takes what is pending (never more
	// than there are callers) and sends it as one atomic batch, or as
	// pipelined plain publishes when the ledger's pipeline or fewer are
	// pending (ledgerjs.PipelineMax), as the ledger's committer.
	Grouped Mode = "grouped"
)

type rawReq struct {
	msg  *nats.Msg
	done chan error
}

// Raw is the raw ceiling: callers each wait for one message shaped as
// the ledger's ACCEPTED event (RawEvent bytes on a new subject as long as
// pc.exec.<intent token>.<execution id>, with the compare-and-set header
// on its intent's filter, as a Begin sends it), over shards file streams
// (RAW0.., subjects raw0.>..).
type Raw struct {
	nc      *nats.Conn
	shards  int
	mode    Mode
	queues  []chan rawReq
	quit    chan struct{}
	once    sync.Once
	payload []byte
}

// Stager stages a stream's atomic batches in memory, as a gateway does its
// execution streams' (server.Gateway.StageInMemory).
type Stager func(stream string)

// NewRaw creates the streams on nc's JetStream (which needs the right to
// create streams) for callers concurrent callers. stage, when set, is
// asked to stage each stream's batches as the ledger's are.
func NewRaw(ctx context.Context, nc *nats.Conn, shards, callers int, mode Mode, stage Stager) (*Raw, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	r := &Raw{nc: nc, shards: shards, mode: mode, quit: make(chan struct{}), payload: make([]byte, RawEvent)}
	for s := range shards {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "RAW" + strconv.Itoa(s), Subjects: []string{fmt.Sprintf("raw%d.>", s)}, Storage: jetstream.FileStorage, AllowAtomicPublish: true,
		}); err != nil {
			r.Close()
			return nil, fmt.Errorf("create raw stream: %w", err)
		}
		if stage != nil {
			stage("RAW" + strconv.Itoa(s))
		}
		q := make(chan rawReq, callers)
		r.queues = append(r.queues, q)
		for range rawWorkers {
			go rawCommit(nc, q, callers, r.quit)
		}
	}
	return r, nil
}

// Close stops the committers (the streams stay).
func (r *Raw) Close() { r.once.Do(func() { close(r.quit) }) }

// Append is one decision of caller: one message, durable on return.
func (r *Raw) Append(caller int) error {
	s := caller % r.shards
	// An intent token (65 characters) and an execution id (30), as the
	// ledger's subjects have them.
	token := (nuid.Next() + nuid.Next() + nuid.Next())[:65]
	m := &nats.Msg{Subject: fmt.Sprintf("raw%d.%s.act_%s", s, token, nuid.Next()+"0000"), Data: r.payload, Header: nats.Header{
		"Nats-Expected-Last-Subject-Sequence":         {"0"},
		"Nats-Expected-Last-Subject-Sequence-Subject": {fmt.Sprintf("raw%d.%s.*", s, token)},
	}}
	if r.mode == Plain {
		resp, err := r.nc.RequestMsg(m, rawAckWait)
		if err != nil {
			return err
		}
		return ackErr(resp.Data)
	}
	req := rawReq{msg: m, done: make(chan error, 1)}
	r.queues[s] <- req
	return <-req.done
}

// rawCommit is one in-flight slot of a stream's committer.
func rawCommit(nc *nats.Conn, q chan rawReq, callers int, quit chan struct{}) {
	for {
		var first rawReq
		select {
		case first = <-q:
		case <-quit:
			return
		}
		group := []rawReq{first}
	fill:
		for len(group) < min(callers, rawMaxBatch) {
			select {
			case r := <-q:
				group = append(group, r)
			default:
				break fill
			}
		}
		if len(group) <= ledgerjs.PipelineMax {
			rawPipelined(nc, group)
			continue
		}
		err := rawBatch(nc, group)
		for _, r := range group {
			r.done <- err
		}
	}
}

// rawPipelined sends each message as its own publish, all in flight at once.
func rawPipelined(nc *nats.Conn, group []rawReq) {
	var wg sync.WaitGroup
	for _, r := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := nc.RequestMsg(r.msg, rawAckWait)
			if err == nil {
				err = ackErr(resp.Data)
			}
			r.done <- err
		}()
	}
	wg.Wait()
}

// rawBatch sends group as one atomic batch.
func rawBatch(nc *nats.Conn, group []rawReq) error {
	id := nuid.Next()
	for i, r := range group {
		m := r.msg
		m.Header["Nats-Batch-Id"] = []string{id}
		m.Header["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
		if i < len(group)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		m.Header["Nats-Batch-Commit"] = []string{"1"}
		resp, err := nc.RequestMsg(m, rawAckWait)
		if err != nil {
			return err
		}
		return ackErr(resp.Data)
	}
	return nil
}

func ackErr(data []byte) error {
	var ack struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if ack.Error != nil {
		return errors.New("refused: " + ack.Error.Description)
	}
	return nil
}
