package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Delivery evidence. A response written to a socket is not proof that the
// agent read it, so DELIVERED is appended only on evidence of receipt:
//   - a later request from the same agent on the same session or the same
//     connection, whose bytes arrived after the response that carried the
//     result completed (arrival.go: a pipelined request, sent before the
//     response was read, is not one);
//   - an explicit acknowledgement: _meta["io.portcullis/ack"] on any
//     request, or the notification notifications/io.portcullis/ack;
//   - a stream resumed with Last-Event-ID at or past the event that
//     carried the result.
//
// Until then the execution stays COMPLETED_RESULT_NOT_DELIVERED and a
// matching retry gets the stored result.
//
// DELIVERED is never on a response's path: evidence queues the executions
// it proves, and one marker goroutine (running while the queue is not
// empty) appends what is queued as one group, every execution's DELIVERED
// submitted at once so the ledger's committer commits them together. It
// lets a group gather first (deliveredLinger, or until deliveredGather
// are queued): the stream commits one write at a time, so a DELIVERED
// appended on its own, the moment the agent's next call arrives, held
// that call's first append for an fsync. A crash before a group lands
// leaves COMPLETED_RESULT_NOT_DELIVERED, whose retry gets the stored
// result.
const (
	// maxAwaiting bounds the sessions and connections with completed
	// responses awaiting evidence; beyond it the oldest are forgotten (their
	// executions stay COMPLETED_RESULT_NOT_DELIVERED, the safe side).
	maxAwaiting      = 1 << 16
	markDeliveredMax = 10 * time.Second
	// deliveredLinger is how long the oldest queued evidence waits for
	// deliveredGather to join its group. One agent calling in a loop
	// (the case it is for) queues about one per call, so the group
	// commits as one atomic batch instead of one fsync per call, each of
	// which held that agent's next call (measured in docs/mcp.md). A
	// larger gather holds the stream longer for its batch: the calls
	// that arrive meanwhile wait for it.
	deliveredLinger = 50 * time.Millisecond
	deliveredGather = 16
	// maxDeliveredGroup bounds the DELIVERED appends submitted together.
	maxDeliveredGroup = 64
	// maxMarksQueued bounds the executions awaiting their DELIVERED
	// append; beyond it evidence is dropped (the safe side, as above).
	maxMarksQueued = 1 << 14
	// maxResumeScan bounds the stored events read on a resumption.
	maxResumeScan = 4096
)

type awaiting struct {
	actor string
	ids   []completed
	at    time.Time // the latest completion
}

// completed is an execution whose result a response carried, and when
// that response completed.
type completed struct {
	id   string
	at   time.Time
	conn *arrivalConn // the agent's connection it was written to (nil: not known here)
}

// unread reports whether the connection the response was written to was
// reset by the agent: it closed it with bytes unread, the response among
// them, so no later request is evidence that it read the response.
func (c completed) unread() bool { return c.conn != nil && c.conn.peerReset() }

// arrival is the latest request from an agent on a session or connection.
type arrival struct {
	actor string
	at    time.Time
}

// mark is one execution that evidence says its agent received.
type mark struct {
	actor, id, evidence string
	at                  time.Time // when the evidence was queued
}

// delivery tracks which responses carried which results, and records
// DELIVERED on evidence.
type delivery struct {
	ledger deliveryLedger
	log    *slog.Logger

	mu       sync.Mutex
	open     map[string]bool     // request nonces whose response is being written
	pending  map[string][]string // request nonce → executions whose result that response carries
	awaiting map[string]awaiting // "s:"+session or "c:"+remote address → completed responses' executions
	arrivals map[string]arrival  // same keys → the latest request seen there
	marks    []mark              // evidence awaiting its DELIVERED append
	marking  bool                // the marker goroutine is running
	closed   bool                // the gateway is closing: no new marks
	closeBy  time.Time           // when closing, the end of the marker's last appends
	idle     *sync.Cond          // signalled when the marker ends
	wake     *sync.Cond          // signalled when a lingering group has gathered or the gateway closes
	linger   time.Duration       // deliveredLinger (tests shorten or stretch it)
	// onGroup, when set (tests), hears the size of every group the marker
	// submits.
	onGroup func(n int)
}

// deliveryLedger is what the marker needs of the ledger (a
// *ledger.Service).
type deliveryLedger interface {
	Transition(ctx context.Context, ch ledger.Change) (*pb.Execution, error)
	Get(ctx context.Context, executionID string) (*pb.Execution, error)
}

func newDelivery(l deliveryLedger, log *slog.Logger) *delivery {
	d := &delivery{ledger: l, log: log, open: map[string]bool{}, pending: map[string][]string{}, awaiting: map[string]awaiting{}, arrivals: map[string]arrival{}}
	d.idle = sync.NewCond(&d.mu)
	d.wake = sync.NewCond(&d.mu)
	d.linger = deliveredLinger
	return d
}

// close stops taking evidence and lets the marker append what is queued,
// the lingering group included, without waiting for more (all of it
// bounded by markDeliveredMax), so a gateway stopped on purpose records
// the evidence it saw. It returns when the marker ended: no DELIVERED is
// appended after the gateway closes its ledger. What could not be
// appended in time stays COMPLETED_RESULT_NOT_DELIVERED, the safe side (a
// retry gets the stored result; the next evidence on any gateway
// delivers it).
func (d *delivery) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		d.closeBy = time.Now().Add(markDeliveredMax)
	}
	d.wake.Broadcast()
	for d.marking {
		d.idle.Wait()
	}
}

// begin opens request nonce; responded closes it.
func (d *delivery) begin(nonce string) {
	d.mu.Lock()
	d.open[nonce] = true
	d.mu.Unlock()
}

// carry notes that the response to request nonce carries execution id's
// result. A handler that finishes after its response was closed (the
// client went away) carries nothing.
func (d *delivery) carry(nonce, id string) {
	if nonce == "" || id == "" {
		return
	}
	d.mu.Lock()
	if d.open[nonce] {
		d.pending[nonce] = append(d.pending[nonce], id)
	}
	d.mu.Unlock()
}

// responded: the response to nonce completed at completedAt (its last
// byte was handed over). Its results now await evidence on each of keys,
// unless writing it failed (then nothing awaits: the retry collects the
// stored result). A request whose bytes arrived on one of keys after
// completedAt, while the handler was still returning, is evidence
// already.
func (d *delivery) responded(ctx context.Context, nonce, actor string, keys []string, conn *arrivalConn, completedAt time.Time, failed bool) {
	d.mu.Lock()
	ids := d.pending[nonce]
	delete(d.pending, nonce)
	delete(d.open, nonce)
	if failed || len(ids) == 0 {
		d.mu.Unlock()
		return
	}
	seen := false
	for _, k := range keys {
		if a, ok := d.arrivals[k]; ok && a.actor == actor && a.at.After(completedAt) {
			seen = true
		}
	}
	if !seen {
		for _, k := range keys {
			if _, ok := d.awaiting[k]; !ok && len(d.awaiting) >= maxAwaiting {
				evictOldest(d.awaiting, func(a awaiting) time.Time { return a.at })
			}
			a := d.awaiting[k]
			if a.actor != "" && a.actor != actor {
				a = awaiting{}
			}
			a.actor, a.at = actor, completedAt
			for _, id := range ids {
				a.ids = append(a.ids, completed{id: id, at: completedAt, conn: conn})
			}
			d.awaiting[k] = a
		}
	}
	d.mu.Unlock()
	if seen && !(completed{conn: conn}).unread() {
		d.mark(ctx, actor, ids, "a later request on the same session or connection")
	}
}

func evictOldest[V any](m map[string]V, at func(V) time.Time) {
	var oldest string
	var t time.Time
	for k, v := range m {
		if oldest == "" || at(v).Before(t) {
			oldest, t = k, at(v)
		}
	}
	delete(m, oldest)
}

// evidence: a new request from actor, whose bytes arrived at arrivedAt,
// came on keys; what completed there before arrivedAt was received. A
// request without an arrival time (zero: its bytes may have come before a
// response completed, see arrival.go) is no evidence.
func (d *delivery) evidence(ctx context.Context, actor string, keys []string, arrivedAt time.Time) {
	if arrivedAt.IsZero() {
		return
	}
	var ids []string
	d.mu.Lock()
	for _, k := range keys {
		if _, ok := d.arrivals[k]; !ok && len(d.arrivals) >= maxAwaiting {
			evictOldest(d.arrivals, func(a arrival) time.Time { return a.at })
		}
		if prev, ok := d.arrivals[k]; !ok || prev.actor != actor || arrivedAt.After(prev.at) {
			d.arrivals[k] = arrival{actor: actor, at: arrivedAt}
		}
		a, ok := d.awaiting[k]
		if !ok || a.actor != actor {
			continue
		}
		keep := a.ids[:0]
		for _, c := range a.ids {
			switch {
			case c.unread():
				// Dropped: its connection was reset with the response
				// unread. A retry gets the stored result; an
				// acknowledgement or a resumed stream still delivers it.
				d.log.Debug("no delivery evidence: the connection that carried the result was reset by the agent", "execution", c.id)
			case c.at.Before(arrivedAt):
				ids = append(ids, c.id)
			default:
				keep = append(keep, c) // completed after this request's bytes arrived
			}
		}
		if len(keep) == 0 {
			delete(d.awaiting, k)
		} else {
			a.ids = keep
			d.awaiting[k] = a
		}
	}
	d.mu.Unlock()
	if len(ids) > 0 {
		// Off the request's path: until it lands, a retry still gets the
		// stored result (the safe side).
		d.mark(ctx, actor, ids, "a later request on the same session or connection")
	}
}

// ack: the agent acknowledged receipt explicitly.
func (d *delivery) ack(ctx context.Context, actor string, ids []string) {
	if len(ids) > 0 {
		d.mark(ctx, actor, ids, "acknowledged by the agent")
	}
}

// resumed: a stream of session sid was resumed with Last-Event-ID; every
// result carried by an event up to and including that one was received.
func (d *delivery) resumed(ctx context.Context, events sdk.EventStore, actor, sid, lastEventID string) {
	streamID, idx, ok := parseEventID(lastEventID)
	if !ok || idx >= maxResumeScan {
		return
	}
	var ids []string
	n := 0
	for data, err := range events.After(ctx, sid, streamID, -1) {
		if err != nil || n > idx {
			break
		}
		n++
		ids = append(ids, carriedExecution(data)...)
	}
	d.mark(ctx, actor, ids, "the stream was resumed past the result's event")
}

// parseEventID reads the SDK's event ids, "<stream>_<index>".
func parseEventID(id string) (string, int, bool) {
	stream, n, ok := strings.Cut(id, "_")
	if !ok || stream == "" || strings.Contains(n, "_") {
		return "", 0, false
	}
	idx, err := strconv.Atoi(n)
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return stream, idx, true
}

// carriedExecution finds the execution whose stored result a stored
// response event carries (our record in the result's _meta).
func carriedExecution(data []byte) []string {
	var resp struct {
		Result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	if json.Unmarshal(data, &resp) != nil {
		return nil
	}
	var rec struct {
		State       string `json:"state"`
		ExecutionID string `json:"execution_id"`
	}
	if json.Unmarshal(resp.Result.Meta[MetaExecution], &rec) != nil || rec.State != "completed" || rec.ExecutionID == "" {
		return nil
	}
	return []string{rec.ExecutionID}
}

// mark queues DELIVERED for each of ids, to be appended off the caller's
// path; the marker appends it for those that belong to actor and await
// delivery, and leaves anything else alone. It never blocks on the ledger.
func (d *delivery) mark(_ context.Context, actor string, ids []string, evidence string) {
	dropped := 0
	now := time.Now()
	d.mu.Lock()
	for _, id := range ids {
		if ledger.ValidateExecutionID(id) != nil {
			continue
		}
		if d.closed {
			continue
		}
		if len(d.marks) >= maxMarksQueued {
			dropped++
			continue
		}
		d.marks = append(d.marks, mark{actor: actor, id: id, evidence: evidence, at: now})
	}
	start := !d.marking && len(d.marks) > 0
	if start {
		d.marking = true
	}
	if len(d.marks) >= deliveredGather {
		d.wake.Broadcast()
	}
	d.mu.Unlock()
	if dropped > 0 {
		d.log.Warn("delivery evidence dropped: too many DELIVERED appends queued; those executions stay COMPLETED_RESULT_NOT_DELIVERED", "dropped", dropped, "queued", maxMarksQueued)
	}
	if start {
		go d.marker()
	}
}

// marker appends the queued DELIVERED events, a group at a time: what is
// queued (maxDeliveredGroup at most) once deliveredGather are queued or
// the oldest has lingered d.linger, so the group grows with the load and
// no evidence waits longer than the linger and one group's append. It
// ends when the queue is empty.
func (d *delivery) marker() {
	for {
		d.mu.Lock()
		d.gather()
		if d.closed && len(d.marks) > 0 && !time.Now().Before(d.closeBy) {
			d.log.Info("closing: delivery evidence not appended in time; those executions stay COMPLETED_RESULT_NOT_DELIVERED", "executions", len(d.marks))
			d.marks = nil
		}
		n := min(len(d.marks), maxDeliveredGroup)
		if n == 0 {
			d.marking = false
			d.idle.Broadcast()
			d.mu.Unlock()
			return
		}
		group := append([]mark(nil), d.marks[:n]...)
		d.marks = append(d.marks[:0], d.marks[n:]...)
		onGroup := d.onGroup
		deadline := time.Now().Add(markDeliveredMax)
		if d.closed {
			deadline = d.closeBy
		}
		d.mu.Unlock()
		if onGroup != nil {
			onGroup(len(group))
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		if len(group) == 1 {
			d.markOne(ctx, group[0]) // the usual group at low load: no goroutine
			cancel()
			continue
		}
		var wg sync.WaitGroup
		for _, m := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.markOne(ctx, m)
			}()
		}
		wg.Wait()
		cancel()
	}
}

// gather waits (d.mu held, released while waiting) until the oldest
// queued mark has lingered d.linger, deliveredGather are queued, or the
// gateway closes.
func (d *delivery) gather() {
	for !d.closed && len(d.marks) > 0 && len(d.marks) < deliveredGather {
		wait := d.linger - time.Since(d.marks[0].at)
		if wait <= 0 {
			return
		}
		t := time.AfterFunc(wait, func() {
			d.mu.Lock()
			d.wake.Broadcast()
			d.mu.Unlock()
		})
		d.wake.Wait()
		t.Stop()
	}
}

// errNotAwaiting stops a DELIVERED whose execution is another agent's or
// does not await delivery.
var errNotAwaiting = errors.New("not awaiting delivery")

// markOne appends DELIVERED if the execution belongs to the agent and
// awaits delivery, under compare-and-set on the execution's subject. It
// decides on this gateway's own latest write (the result it just
// recorded) or the views; when those say "not awaiting", it reads the log
// itself before leaving the execution alone (another gateway may have
// recorded the result).
func (d *delivery) markOne(ctx context.Context, m mark) {
	ch := ledger.Change{ExecutionID: m.id, Event: pb.EventType_EVENT_TYPE_DELIVERED, Evidence: m.evidence,
		Require: func(x *pb.Execution, _ time.Time) error {
			if x.GetActor() != m.actor || x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
				return errNotAwaiting
			}
			return nil
		}}
	_, err := d.ledger.Transition(ctx, ch)
	if errors.Is(err, errNotAwaiting) {
		x, gerr := d.ledger.Get(ctx, m.id)
		if gerr != nil || x.GetActor() != m.actor || x.GetState() != pb.State_STATE_COMPLETED_RESULT_NOT_DELIVERED {
			return
		}
		_, err = d.ledger.Transition(ctx, ch)
	}
	var ite *ledger.IllegalTransitionError
	if err != nil && !errors.Is(err, errNotAwaiting) && !errors.Is(err, ledger.ErrNotFound) && !errors.As(err, &ite) {
		d.log.Warn("mark delivered", "execution", m.id, "err", err)
	}
}
