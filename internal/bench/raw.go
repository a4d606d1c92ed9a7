package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
)

// Limits of the raw ceiling's committer (the ledger's, see
// ledger/jetstream/committer.go).
const (
	rawPayload     = 300  // bytes per message, about one signed event
	rawMaxBatch    = 1000 // the server's atomic batch limit
	rawWorkers     = 2    // batches in flight per stream
	rawAckWait     = 10 * time.Second
	rawPipelineMax = 8 // pending single decisions sent as pipelined plain publishes
)

// rawMode is how the ceiling's callers reach the stream.
type rawMode string

const (
	// rawPlain: every caller sends its own compare-and-set publish.
	rawPlain rawMode = "plain"
	// rawGrouped: each stream's committer takes what is pending (never more
	// than there are callers) and sends it as one atomic batch, or as
	// pipelined publishes when 8 or fewer are pending.
	rawGrouped rawMode = "grouped"
)

type rawReq struct {
	msg  *nats.Msg
	done chan error
}

// rawCeiling is the raw JetStream ceiling measured the way the ledger uses
// it: callers each wait for one 300-byte message with its own subject and
// compare-and-set header, over shards file streams on the gateway's own
// embedded server (sync always).
func rawCeiling(shards int, mode rawMode) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		g, err := startGW(ctx, ledgerConfig, nil, "")
		if err != nil {
			return nil, nil, err
		}
		auth, err := natsauth.ClientOption(g.CredsFile(natsauth.Admin))
		if err != nil {
			g.close()
			return nil, nil, err
		}
		nc, err := nats.Connect(g.NatsURL, auth)
		if err != nil {
			g.close()
			return nil, nil, err
		}
		cleanup := func() { nc.Close(); g.close() }
		js, _ := jetstream.New(nc)
		queues := make([]chan rawReq, shards)
		quit := make(chan struct{})
		for s := range shards {
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
				Name: "RAW" + strconv.Itoa(s), Subjects: []string{fmt.Sprintf("raw%d.>", s)}, Storage: jetstream.FileStorage, AllowAtomicPublish: true,
			}); err != nil {
				cleanup()
				return nil, nil, err
			}
			queues[s] = make(chan rawReq, callers)
			for range rawWorkers {
				go rawCommit(nc, queues[s], callers, quit)
			}
		}
		payload := make([]byte, rawPayload)
		op := func(_ context.Context, c, _ int) error {
			s := c % shards
			m := &nats.Msg{Subject: fmt.Sprintf("raw%d.%s", s, nuid.Next()), Data: payload, Header: nats.Header{
				"Nats-Expected-Last-Subject-Sequence": {"0"},
			}}
			if mode == rawPlain {
				resp, err := nc.RequestMsg(m, rawAckWait)
				if err != nil {
					return err
				}
				return ackErr(resp.Data)
			}
			r := rawReq{msg: m, done: make(chan error, 1)}
			queues[s] <- r
			return <-r.done
		}
		return op, func() { close(quit); cleanup() }, nil
	}
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
		if len(group) <= rawPipelineMax {
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
	type pending struct {
		r   rawReq
		sub *nats.Subscription
	}
	ps := make([]pending, 0, len(group))
	for _, r := range group {
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err == nil {
			r.msg.Reply = inbox
			err = nc.PublishMsg(r.msg)
		}
		if err != nil {
			r.done <- err
			continue
		}
		ps = append(ps, pending{r, sub})
	}
	for _, p := range ps {
		resp, err := p.sub.NextMsg(rawAckWait)
		_ = p.sub.Unsubscribe()
		if err == nil {
			err = ackErr(resp.Data)
		}
		p.r.done <- err
	}
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
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if ack.Error != nil {
		return errors.New("refused: " + ack.Error.Description)
	}
	return nil
}
