package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// Limits of the group committer.
const (
	maxBatchMsgs    = 1000 // the server's atomic batch limit
	defaultInflight = 2    // batches awaiting acknowledgement at once
	maxInflight     = 32   // below the server's 50 per stream
	queueLen        = 8192 // decisions waiting for a batch
	maxCarry        = 4096 // decisions a worker holds back for the next batch

	// ElectionTimeoutMax mirrors nats-server's default maximum raft
	// election timeout (maxElectionTimeoutDefault, 9 s; the minimum is 4 s):
	// after a stream leader dies, a new one answers within about this long.
	ElectionTimeoutMax = 9 * time.Second
	// AckWaitMax bounds the wait for one acknowledgement: one election plus
	// slack, so a write sent while the leader moves is answered by the new
	// leader instead of being given up as unknown.
	AckWaitMax = ElectionTimeoutMax + 4*ackAttemptWait
	// ackAttemptWait is one try of a single-message publish on a cluster.
	// There it carries a Nats-Msg-Id, so after a silent try it is sent
	// again (a clustered stream's duplicate window answers with the first
	// copy's sequence if that one landed) until the acknowledgement wait
	// passed: a publish lost with a dead leader is resent as soon as the
	// new leader is elected. A single server has no leader to lose: there
	// one try waits the whole time, and the publish carries no id.
	ackAttemptWait = time.Second

	// Transient refusals (nothing landed: a previous write on the subject
	// still replicating, 10164; no leader, 10008/503; too many batches in
	// flight) are retried after a jittered backoff growing from
	// transientBackoffFirst to transientBackoffMax, transientRetries times.
	transientRetries      = 8
	transientBackoffFirst = 2 * time.Millisecond
	transientBackoffMax   = 250 * time.Millisecond
)

// JetStream error codes the committer understands.
const (
	errCodeClusterNoPeers       = 10005 // no suitable peers for placement (yet)
	errCodeClusterNotAvail      = 10008 // JetStream temporarily unavailable (no leader)
	errCodeWrongLastSeq         = 10071
	errCodeStreamOffline        = 10118
	errCodeWrongLastSeqConstant = 10164 // the subject's previous write is still being replicated
	errCodeBatchIncomplete      = 10176
	errCodeBatchTooManyInflight = 10210
)

// PipelineMax is how many single-message decisions the committer keeps in
// flight as plain publishes: a group of no more goes out plain,
// a larger one as an atomic batch. The embedded server syncs the plain
// publishes its stream loop takes together once (third_party/nats-server),
// so a few pipelined publishes share a sync without an atomic batch's
// staging; larger groups still pay for one batch's fixed cost with less CPU
// per decision (one acknowledgement, one goroutine). Measured against 4 and
// unlimited in docs/performance.md ("Plain publishes synced together"),
// while batches were staged on a tmpfs (not again with the memory store).
// The raw ceiling (internal/benchkit) sends the same way.
const PipelineMax = 16

var errClosed = errors.New("ledger log closed")

type outMsg struct {
	subject  string
	check    string // subject (filter) the condition is on; "" = subject
	expected uint64
	follows  bool // no condition: continues the previous message of its decision
	data     []byte
	unsigned []byte // the event's hash while data awaits its group signature
}

// checked is the subject (filter) the message's condition reads.
func (m outMsg) checked() string {
	if m.check != "" {
		return m.check
	}
	return m.subject
}

// decision is one caller's append: all its messages land together or not at all.
type decision struct {
	ctx  context.Context
	msgs []outMsg
	seqs []uint64
	err  error
	done chan struct{}
}

func (d *decision) finish(seqs []uint64, err error) {
	d.seqs, d.err = seqs, err
	close(d.done)
}

// committer coalesces concurrent decisions into JetStream atomic batches.
// Several workers each keep one batch in flight, so while one batch is
// being synced to disk the next one fills; no caller waits for a batch to
// fill. A batch never holds two messages for one subject, and no two
// batches in flight do: each message keeps its own compare-and-set
// condition, and one failed condition fails only its own decision (the
// batch is split until the conflicting decision is isolated).
type committer struct {
	nc          *nats.Conn
	inflightMax int
	queue       chan *decision
	maxBatch    int
	ackWait     time.Duration
	known       knownSeqs
	log         *slog.Logger
	onCommit    func(messages int, took time.Duration)
	signer      *GroupSigner // nil: events come signed
	feed        *Feed        // nil: none

	busyMu sync.Mutex
	busy   claims // what the group being built and the groups in flight touch (claims.go)

	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newCommitter(nc *nats.Conn, opt Options) *committer {
	n := opt.InflightBatches
	if n <= 0 {
		n = defaultInflight
	}
	n = min(n, maxInflight)
	mb := opt.MaxBatch
	if mb <= 0 || mb > maxBatchMsgs {
		mb = maxBatchMsgs
	}
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	ackWait := opt.AckWait
	if ackWait <= 0 {
		ackWait = AckWaitMax
	}
	c := &committer{
		nc: nc, inflightMax: n, queue: make(chan *decision, queueLen), maxBatch: mb, log: lg, ackWait: ackWait, onCommit: opt.OnCommit, signer: opt.GroupSigner, feed: opt.Feed,
		known: knownSeqs{m: make(map[string]uint64)}, busy: newClaims(), quit: make(chan struct{}),
	}
	if c.signer == nil {
		c.signer = NewGroupSigner(opt.GroupSignKey)
	}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *committer) close() {
	c.once.Do(func() { close(c.quit) })
	c.wg.Wait()
	for {
		select {
		case d := <-c.queue:
			d.finish(nil, errClosed)
		default:
			return
		}
	}
}

func (c *committer) submit(ctx context.Context, d *decision) ([]uint64, error) {
	select {
	case c.queue <- d:
	case <-ctx.Done():
		return nil, ctx.Err() // never sent
	case <-c.quit:
		return nil, errClosed
	}
	select {
	case <-d.done:
		return d.seqs, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ledger.ErrAppendUnknown, ctx.Err())
	}
}

// sent is one publish in flight: an atomic batch, or one decision sent as
// a plain publish.
type sent struct {
	batch []*decision
	plain bool
}

// run is the committer's one dispatch loop. It sizes each group from what
// is pending: while fewer than inflightMax batches await their
// acknowledgement it sends whatever is pending at once (no caller waits
// for a batch to fill). While no batch is in flight and the group fits in
// what remains of PipelineMax plain publishes in flight, it goes out as
// plain publishes that hold no batch slot (a few plain publishes cost the
// server less than one atomic batch's staging); else it takes a batch slot
// (commit pipelines up to PipelineMax single decisions, sends more as one
// atomic batch). Beyond that, arrivals pile up into the next batch, so
// under load no plain publish takes the server's time from a batch. The server
// commits one stream's writes one after another, so a second batch in
// flight keeps it busy while the first one's callers turn around. A group
// is signed once (GroupSignKey), however it goes out.
func (c *committer) run() {
	defer c.wg.Done()
	var carry []*decision
	done := make(chan sent, c.inflightMax+PipelineMax)
	batches, plains := 0, 0
	for {
		pending := len(carry) + len(c.queue)
		if pending > 0 && batches < c.inflightMax {
			var group []*decision
			group, carry = c.collect(carry)
			if len(group) > 0 {
				if batches > 0 || len(group) > PipelineMax-plains || !singleMessages(group) {
					batches++
					go func() {
						c.sign(group)
						c.commit(group, 0)
						done <- sent{batch: group}
					}()
				} else {
					plains += len(group)
					go func() {
						c.sign(group)
						last := len(group) - 1
						for _, d := range group[:last] {
							go func() {
								c.commit([]*decision{d}, 0)
								done <- sent{batch: []*decision{d}, plain: true}
							}()
						}
						c.commit(group[last:], 0) // the last one here: one goroutine less per lone decision
						done <- sent{batch: group[last:], plain: true}
					}()
				}
				continue
			}
		}
		if pending == 0 && batches+plains == 0 {
			select {
			case d := <-c.queue:
				carry = append(carry, d)
			case <-c.quit:
				return
			}
			continue
		}
		queue := c.queue
		if len(carry) >= maxCarry {
			queue = nil // hold the queue back until something is sent
		}
		select {
		case b := <-done:
			c.release(b.batch)
			if b.plain {
				plains--
			} else {
				batches--
			}
		case d := <-queue:
			carry = append(carry, d)
		case <-c.quit:
			for _, d := range carry {
				d.finish(nil, errClosed)
			}
			for ; batches+plains > 0; batches-- {
				c.release((<-done).batch)
			}
			return
		}
	}
}

// collect builds the next group from the held-back decisions, then from
// the queue without waiting, up to maxBatch messages. Decisions whose
// subject is already in this group or in one in flight are held back;
// decisions that certainly conflict (their subject already moved past what
// they read) fail at once.
func (c *committer) collect(carry []*decision) (batch, held []*decision) {
	limit := c.maxBatch
	n := 0
	c.busyMu.Lock()
	defer c.busyMu.Unlock()
	take := func(d *decision) {
		if err := d.ctx.Err(); err != nil {
			d.finish(nil, err) // never sent
			return
		}
		for _, m := range d.msgs {
			if m.follows {
				continue
			}
			if seq, moved := c.known.moved(m.checked(), m.expected); moved {
				d.finish(nil, &ledger.ConflictError{Subject: m.checked(), Expected: m.expected, ActualSeq: seq})
				return
			}
		}
		if n+len(d.msgs) > limit {
			held = append(held, d)
			return
		}
		for _, m := range d.msgs {
			if !c.busy.free(m) {
				held = append(held, d)
				return
			}
		}
		for _, m := range d.msgs {
			c.busy.take(m)
		}
		n += len(d.msgs)
		batch = append(batch, d)
	}
	for _, d := range carry {
		take(d)
	}
	for n < limit && len(held) < maxCarry {
		select {
		case d := <-c.queue:
			take(d)
		default:
			return batch, held
		}
	}
	return batch, held
}

func (c *committer) release(batch []*decision) {
	c.busyMu.Lock()
	for _, d := range batch {
		for _, m := range d.msgs {
			c.busy.release(m)
		}
	}
	c.busyMu.Unlock()
}

// sign gives the batch's unsigned events one group signature: a batch
// is one commit group, whether it goes out as one atomic batch or as
// pipelined publishes (groups of other logs that share the signer may
// share the signature).
func (c *committer) sign(batch []*decision) {
	var hashes [][]byte
	for _, d := range batch {
		for _, m := range d.msgs {
			if m.unsigned != nil {
				hashes = append(hashes, m.unsigned)
			}
		}
	}
	if len(hashes) == 0 {
		return
	}
	gs, i := c.signer.sign(hashes)
	for _, d := range batch {
		for j := range d.msgs {
			if m := &d.msgs[j]; m.unsigned != nil {
				m.data = ledger.AppendGroupSignature(m.data, gs, i)
				m.unsigned = nil
				i++
			}
		}
	}
}

// commit publishes the batch and answers every decision in it. Up to
// PipelineMax single-message decisions go out as separate pipelined
// publishes: an atomic batch has a fixed cost at the server (its staging
// store, about 2 ms on this machine's disk, some CPU even when staged in
// memory) that only pays off for larger batches.
func (c *committer) commit(batch []*decision, attempt int) {
	if len(batch) > 1 && len(batch) <= PipelineMax && singleMessages(batch) {
		var wg sync.WaitGroup
		for _, d := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.commit([]*decision{d}, attempt)
			}()
		}
		wg.Wait()
		return
	}
	var msgs []outMsg
	for _, d := range batch {
		msgs = append(msgs, d.msgs...)
	}
	start := time.Now()
	last, err := c.publish(msgs)
	if c.onCommit != nil {
		c.onCommit(len(msgs), time.Since(start))
	}
	var je *apiError
	switch {
	case err == nil:
		seq := last - uint64(len(msgs)) + 1
		c.fed(msgs, seq)
		for _, d := range batch {
			seqs := make([]uint64, len(d.msgs))
			for i, m := range d.msgs {
				seqs[i] = seq
				c.known.landed(m.subject, seq)
				c.known.landed(parentFilter(m.subject), seq) // the parent filter moved too
				seq++
			}
			d.finish(seqs, nil)
		}
	case errors.As(err, &je) && je.transient() && attempt < transientRetries:
		time.Sleep(transientBackoff(attempt))
		c.commit(batch, attempt+1)
	case errors.As(err, &je) && (je.conflict() || je.ErrCode == errCodeWrongLastSeqConstant):
		// 10164 that outlived its retries: treated as a conflict, so the
		// decision reads the subject again and decides again.
		if len(batch) == 1 {
			m := batch[0].msgs[0]
			batch[0].finish(nil, &ledger.ConflictError{Subject: m.checked(), Expected: m.expected, ActualSeq: je.actualSeq()})
			return
		}
		half := len(batch) / 2
		c.commit(batch[:half], 0)
		c.commit(batch[half:], 0)
	case errors.As(err, &je):
		// The server refused the batch: nothing landed.
		for _, d := range batch {
			d.finish(nil, fmt.Errorf("append to %s: %w", d.msgs[0].subject, je))
		}
	default:
		c.log.Warn("append outcome unknown", "messages", len(msgs), "err", err)
		for _, d := range batch {
			d.finish(nil, fmt.Errorf("%w: %v", ledger.ErrAppendUnknown, err))
		}
	}
}

// fed offers an acknowledged group, stored from sequence first on, to the feed.
func (c *committer) fed(msgs []outMsg, first uint64) {
	if c.feed == nil {
		return
	}
	es := make([]projector.Entry, len(msgs))
	for i, m := range msgs {
		es[i] = projector.Entry{Seq: first + uint64(i), Subject: m.subject, Data: m.data}
	}
	c.feed.offer(es)
}

// transientBackoff is the wait before retry attempt+1: exponential with
// full jitter in its upper half, capped.
func transientBackoff(attempt int) time.Duration {
	d := min(transientBackoffFirst<<attempt, transientBackoffMax)
	return d/2 + rand.N(d/2+1)
}

func singleMessages(batch []*decision) bool {
	for _, d := range batch {
		if len(d.msgs) != 1 {
			return false
		}
	}
	return true
}

// publish sends msgs as one atomic batch (a single message as a plain
// publish) and returns the stream sequence of the last one.
func (c *committer) publish(msgs []outMsg) (uint64, error) {
	if len(msgs) == 1 {
		m := msgs[0]
		h := m.header()
		deadline := time.Now().Add(c.ackWait)
		attemptWait := c.ackWait
		if c.nc.ConnectedClusterName() != "" {
			// Only a resend needs the id, and only a cluster is resent
			// to: a single server would keep every id for the duplicate
			// window (a map entry per append) and store it with the event.
			h["Nats-Msg-Id"] = []string{nuid.Next()}
			attemptWait = min(ackAttemptWait, c.ackWait)
		}
		nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: h}
		for resent := false; ; resent = true {
			resp, err := c.nc.RequestMsg(nm, attemptWait)
			if err == nil {
				seq, err := parseAck(resp.Data)
				var je *apiError
				if resent && errors.As(err, &je) && je.conflict() {
					// The first copy may have landed: a clustered stream would
					// have answered with its sequence (the id check comes
					// before the condition there), a single server checks the
					// condition first. Nobody can tell whose write moved it.
					return 0, fmt.Errorf("%w: resent after an unanswered try, then %v", ledger.ErrAppendUnknown, je)
				}
				return seq, err
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
				return 0, err
			}
			if errors.Is(err, nats.ErrNoResponders) {
				time.Sleep(transientBackoffMax) // no stream leader yet
			}
		}
	}
	id := nuid.Next()
	for i, m := range msgs {
		h := m.header()
		h["Nats-Batch-Id"] = []string{id}
		h["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
		nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: h}
		if i < len(msgs)-1 {
			if err := c.nc.PublishMsg(nm); err != nil {
				return 0, &apiError{Code: 503, ErrCode: errCodeBatchIncomplete, Description: err.Error()}
			}
			continue
		}
		h["Nats-Batch-Commit"] = []string{"1"}
		resp, err := c.nc.RequestMsg(nm, c.ackWait)
		if err != nil {
			return 0, err
		}
		return parseAck(resp.Data)
	}
	panic("unreachable")
}

// header carries the message's compare-and-set condition.
func (m outMsg) header() nats.Header {
	if m.follows {
		return nats.Header{}
	}
	h := nats.Header{"Nats-Expected-Last-Subject-Sequence": {strconv.FormatUint(m.expected, 10)}}
	if m.check != "" {
		h["Nats-Expected-Last-Subject-Sequence-Subject"] = []string{m.check}
	}
	return h
}

// apiError is a JetStream error answer to a publish.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (code %d/%d)", e.Description, e.Code, e.ErrCode)
}

func (e *apiError) conflict() bool {
	return e.ErrCode == errCodeWrongLastSeq
}

// transient: the server took nothing and may take the same batch later.
func (e *apiError) transient() bool {
	switch e.ErrCode {
	case errCodeBatchIncomplete, errCodeBatchTooManyInflight, errCodeWrongLastSeqConstant, errCodeClusterNotAvail, errCodeStreamOffline:
		return true
	}
	return e.Code == 503
}

func (e *apiError) actualSeq() uint64 {
	_, after, ok := strings.Cut(e.Description, ": ")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseUint(after, 10, 64)
	return n
}

func parseAck(data []byte) (uint64, error) {
	var ack struct {
		Seq   uint64    `json:"seq"`
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, fmt.Errorf("%w: unreadable acknowledgement %q", ledger.ErrAppendUnknown, data)
	}
	if ack.Error != nil {
		return 0, ack.Error
	}
	if ack.Seq == 0 {
		return 0, fmt.Errorf("%w: acknowledgement without a sequence %q", ledger.ErrAppendUnknown, data)
	}
	return ack.Seq, nil
}
