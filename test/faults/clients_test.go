package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	callWaitMax  = 30 * time.Second // one call when it is not cut (rides out an election)
	cutWaitMax   = 30 * time.Millisecond
	opAttempts   = 4 // Begins per operation key (the agent retrying)
	retryPause   = 200 * time.Millisecond
	opPauseMin   = 20 * time.Millisecond // between one worker's operations
	agentToken   = "campaign-agent-token"
	connectActor = "agent-c"
)

// history is what happened to each operation key (intent), for the report
// of a failing checker.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   map[string][]string
}

func (h *history) add(key, format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[key] = append(h.ops[key], fmt.Sprintf("%7.3fs ", time.Since(h.start).Seconds())+fmt.Sprintf(format, a...))
}

func (h *history) of(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return "    " + strings.Join(h.ops[key], "\n    ")
}

// ackKind is what a client was told landed.
type ackKind int

const (
	ackBegin ackKind = iota
	ackAttach
	ackDispatched
	ackResult
	ackMCP
)

func (k ackKind) String() string {
	return [...]string{"Begin NEW", "Begin ATTACHED", "MarkDispatched", "RecordResult", "MCP tools/call"}[k]
}

type ack struct {
	at     time.Time
	kind   ackKind
	opKey  string
	execID string
}

// acks collects every acknowledged operation.
type acks struct {
	mu   sync.Mutex
	list []ack
	cuts atomic.Int64 // agent connections cut on purpose
}

func (a *acks) add(k ackKind, opKey, execID string) {
	a.mu.Lock()
	a.list = append(a.list, ack{at: time.Now(), kind: k, opKey: opKey, execID: execID})
	a.mu.Unlock()
}

func (a *acks) snapshot() []ack {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ack(nil), a.list...)
}

// lastAfter is whether some operation was acknowledged after t.
func (a *acks) lastAfter(t time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.list) > 0 && a.list[len(a.list)-1].at.After(t)
}

// target counts every request with its Idempotency-Key, and performs each
// key once (as an idempotent target does).
type target struct {
	*httptest.Server
	mu    sync.Mutex
	sends map[string]int    // Idempotency-Key → requests
	op    map[string]string // Idempotency-Key → operation key (from the body)
}

func newTarget() *target {
	tg := &target{sends: map[string]int{}, op: map[string]string{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		var body struct {
			Op string `json:"op"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		tg.mu.Lock()
		tg.sends[key]++
		if body.Op != "" {
			tg.op[key] = body.Op
		}
		tg.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charged":%q}`, key)
	}))
	return tg
}

// send performs the Connect client's effect itself (the client executes).
func (tg *target) send(ctx context.Context, execID, opKey string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/pay", bytes.NewReader([]byte(fmt.Sprintf(`{"op":%q}`, opKey))))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", execID)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// cut is where an agent's connection is cut during one operation.
type cut int

const (
	cutNone cut = iota
	cutBeforeAccept
	cutAfterAccept
	cutInDispatch
	cutAfterDispatch
	cutAfterTarget
	cutInResult
)

func pickCut(r *rand.Rand) cut {
	if r.IntN(100) < 60 {
		return cutNone
	}
	return cut(1 + r.IntN(6))
}

func (c cut) String() string {
	return [...]string{"none", "before accept", "after accept", "in MarkDispatched", "after dispatch", "after the target answered", "in RecordResult"}[c]
}

// load is the clients: Connect workers (Begin/MarkDispatched/effect/
// RecordResult) and MCP workers (tools/call with an operation key).
type load struct {
	decisions decisions
	gws       []*gateway
	tg        *target
	acks      *acks
	hist      *history
	stop      atomic.Bool
	ops       atomic.Int64
}

func (l *load) callCtx(cutHere bool, r *rand.Rand) (context.Context, context.CancelFunc) {
	if cutHere {
		l.acks.cuts.Add(1)
		return context.WithTimeout(context.Background(), time.Duration(r.Int64N(int64(cutWaitMax))))
	}
	return context.WithTimeout(context.Background(), callWaitMax)
}

func (l *load) connectWorker(w int, r *rand.Rand) {
	for n := 0; !l.stop.Load(); n++ {
		l.connectOp(fmt.Sprintf("op-c%d-%d", w, n), w, r)
		l.ops.Add(1)
		time.Sleep(opPauseMin + time.Duration(r.Int64N(int64(opPauseMin))))
	}
}

func (l *load) connectOp(key string, w int, r *rand.Rand) {
	ct := pickCut(r)
	token := "tok-" + key
	args, _ := structpb.NewStruct(map[string]any{"op": key})
	for attempt := 0; attempt < opAttempts && !l.stop.Load(); attempt++ {
		gi := r.IntN(len(l.gws))
		c := l.gws[gi].connect()
		first := attempt == 0
		ctx, cancel := l.callCtx(first && ct == cutBeforeAccept, r)
		called := time.Now()
		res, err := c.Begin(ctx, connect.NewRequest(&pb.BeginRequest{
			Action: &pb.Action{Actor: fmt.Sprintf("%s%d", connectActor, w), Tool: "pay", Channel: "http", Target: "127.0.0.1/pay",
				Method: "POST", Arguments: args, IntentScope: "campaign"},
			OperationKey: key,
			Correlation:  &pb.Correlation{JsonrpcId: fmt.Sprint(attempt), SessionId: fmt.Sprintf("c%d", w)},
		}))
		cancel()
		if err != nil {
			l.decisions.add(decision{client: w, key: key, call: called, pending: true})
			l.hist.add(key, "gw%d Begin: %v", gi, err)
			time.Sleep(retryPause)
			continue
		}
		ex := res.Msg.GetExecution()
		id := ex.GetExecutionId()
		kind, dk := ackBegin, decNew
		if res.Msg.GetDecision() == pb.Decision_DECISION_ATTACHED {
			kind, dk = ackAttach, decAttached
		}
		l.decisions.add(decision{client: w, key: key, call: called, ret: time.Now(), kind: dk, id: id})
		l.acks.add(kind, key, id)
		l.hist.add(key, "gw%d Begin: %v %s state %v recovery %v", gi, res.Msg.GetDecision(), id, ex.GetState(), res.Msg.GetRecovery())
		if res.Msg.GetDecision() != pb.Decision_DECISION_NEW && res.Msg.GetRecovery() != pb.Recovery_RECOVERY_RESUME {
			return // in flight elsewhere, done, or unknown: this agent leaves it
		}
		if first && ct == cutAfterAccept {
			l.hist.add(key, "cut after accept")
			l.acks.cuts.Add(1)
			continue // the agent retries: the same execution, resumed
		}
		l.dispatch(key, id, token, ct, c, gi, r)
		return
	}
}

type execClient interface {
	MarkDispatched(context.Context, *connect.Request[pb.MarkDispatchedRequest]) (*connect.Response[pb.MarkDispatchedResponse], error)
	RecordResult(context.Context, *connect.Request[pb.RecordResultRequest]) (*connect.Response[pb.RecordResultResponse], error)
}

func (l *load) dispatch(key, id, token string, ct cut, c execClient, gi int, r *rand.Rand) {
	won := false
	for try := 0; try < opAttempts && !won; try++ {
		ctx, cancel := l.callCtx(try == 0 && ct == cutInDispatch, r)
		_, err := c.MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id, DispatchToken: token}))
		cancel()
		switch {
		case err == nil:
			won = true
		case connect.CodeOf(err) == connect.CodeFailedPrecondition:
			l.hist.add(key, "gw%d MarkDispatched lost: %v", gi, err)
			return
		default:
			l.hist.add(key, "gw%d MarkDispatched: %v", gi, err)
			// the same token again (another gateway if this one is gone)
			gi = r.IntN(len(l.gws))
			c = l.gws[gi].connect()
			time.Sleep(retryPause)
		}
	}
	if !won {
		return // maybe dispatched: an orphan for the sweep
	}
	l.acks.add(ackDispatched, key, id)
	l.hist.add(key, "gw%d MarkDispatched ok", gi)
	if ct == cutAfterDispatch {
		l.acks.cuts.Add(1)
		l.hist.add(key, "cut after dispatch (orphan)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWaitMax)
	err := l.tg.send(ctx, id, key)
	cancel()
	if err != nil {
		l.hist.add(key, "target: %v", err)
		return
	}
	l.hist.add(key, "target answered")
	if ct == cutAfterTarget {
		l.acks.cuts.Add(1)
		l.hist.add(key, "cut after the target answered (orphan)")
		return
	}
	for try := 0; try < opAttempts; try++ {
		ctx, cancel := l.callCtx(try == 0 && ct == cutInResult, r)
		_, err := c.RecordResult(ctx, connect.NewRequest(&pb.RecordResultRequest{ExecutionId: id, TargetStatus: http.StatusCreated,
			ResultBody: `{"ok":true}`, ResultContentType: "application/json"}))
		cancel()
		if err == nil {
			l.acks.add(ackResult, key, id)
			l.hist.add(key, "gw%d RecordResult ok", gi)
			return
		}
		l.hist.add(key, "gw%d RecordResult: %v", gi, err)
		if connect.CodeOf(err) == connect.CodeFailedPrecondition {
			return
		}
		gi = r.IntN(len(l.gws))
		c = l.gws[gi].connect()
		time.Sleep(retryPause)
	}
}

type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+agentToken)
	return b.rt.RoundTrip(r)
}

func (l *load) mcpWorker(w int, r *rand.Rand) {
	for n := 0; !l.stop.Load(); n++ {
		l.mcpOp(fmt.Sprintf("op-m%d-%d", w, n), w, r)
		l.ops.Add(1)
		time.Sleep(opPauseMin + time.Duration(r.Int64N(int64(opPauseMin))))
	}
}

func (l *load) mcpOp(key string, w int, r *rand.Rand) {
	cutFirst := r.IntN(100) < 30
	for attempt := 0; attempt < opAttempts && !l.stop.Load(); attempt++ {
		gi := r.IntN(len(l.gws))
		ctx, cancel := l.callCtx(attempt == 0 && cutFirst, r)
		called := time.Now()
		// Each call is its own agent process: its own transport, so a cut
		// closes the connection the call travels on.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		c := sdk.NewClient(&sdk.Implementation{Name: "campaign-agent", Version: "1"}, nil)
		s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + l.gws[gi].addr + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{rt: tr}}, MaxRetries: -1}, nil)
		var res *sdk.CallToolResult
		if err == nil {
			res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "charge", Arguments: map[string]any{"op": key},
				Meta: sdk.Meta{"io.portcullis/operation-key": key}})
			s.Close()
		}
		cancel()
		tr.CloseIdleConnections()
		if err != nil {
			l.decisions.add(decision{client: w, key: key, call: called, pending: true})
			l.hist.add(key, "gw%d tools/call: %v", gi, err)
			time.Sleep(retryPause)
			continue
		}
		var rec struct {
			ExecutionID string `json:"execution_id"`
			State       string `json:"state"`
		}
		if b, merr := json.Marshal(res.Meta["io.portcullis/execution"]); merr == nil {
			_ = json.Unmarshal(b, &rec)
		}
		l.hist.add(key, "gw%d tools/call: %s %s (isError %v)", gi, rec.ExecutionID, rec.State, res.IsError)
		if rec.ExecutionID != "" {
			l.acks.add(ackMCP, key, rec.ExecutionID)
			l.decisions.add(decision{client: w, key: key, call: called, ret: time.Now(), kind: decAny, id: rec.ExecutionID})
		} else {
			l.decisions.add(decision{client: w, key: key, call: called, pending: true})
		}
		if rec.State == "completed" || !res.IsError {
			return
		}
		time.Sleep(retryPause)
	}
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
