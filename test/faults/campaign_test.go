// Package faults is the seeded fault campaign of the shared ledger: a
// 3-node nats-server cluster (processes built from the module), three
// `portcullis serve` gateways, a counting HTTP target, Connect and MCP
// clients, and, from a seed, faults injected for a bounded time; then
// checkers over the streams, the target and `portcullis audit verify`.
//
//	go test ./test/faults/ -run Campaign -seed 7 -duration 2m -v
package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
)

var (
	seedFlag       = flag.Uint64("seed", 1, "the campaign's seed (0: time-based; printed either way)")
	durationFlag   = flag.Duration("duration", 40*time.Second, "how long faults are injected")
	execShards     = flag.Int("exec-shards", 0, "execution shards of the campaign's ledger (0: the default of a new ledger)")
	strictReplicas = flag.Bool("strict-replicas", false, "fail when a replica whose store the campaign corrupted stays different (a nats-server finding, reported either way)")
)

const (
	connectWorkers = 4
	mcpWorkers     = 2
	// pauseMin is how long a paused node stays stopped: past nats-server's
	// maximum election timeout (9 s).
	pauseMin       = 10 * time.Second
	recoverWaitMax = 60 * time.Second // a fault healed: operations acknowledged again within this
	fpKey          = "3031323334353637383961626364656630313233343536373839616263646566"
)

// faultKind is one kind of injected fault.
type faultKind string

const (
	faultGatewayKill faultKind = "gateway SIGKILL + restart"
	faultLeaderKill  faultKind = "NATS stream leader SIGKILL + restart"
	faultNodePause   faultKind = "NATS node SIGSTOP > election timeout"
	faultPartition   faultKind = "NATS node partitioned (routes blocked)"
	faultCorrupt     faultKind = "bit flip / truncation in a follower's store"
	faultAgentCut    faultKind = "agent connection cut"
)

var faultKinds = []faultKind{faultGatewayKill, faultLeaderKill, faultNodePause, faultPartition, faultCorrupt}

// fault is one injection, from injected to recovered.
type fault struct {
	kind      faultKind
	what      string
	start     time.Time
	healed    time.Time
	end       time.Time // recovered (or gave up)
	recovered bool
	gap       time.Duration // longest time without any acknowledged operation
}

func campaignConfig(tgURL string) string {
	sum := sha256.Sum256([]byte(agentToken))
	return fmt.Sprintf(`
agents:
  agent-7: {token_sha256: %s}
tools:
  pay:            # Connect clients: they dispatch themselves
    retry: idempotency_key
    match_window: 10m
    timeout: 1s   # dispatch deadline 1s + ledger.DispatchGrace
  charge:         # MCP: the gateway's driver sends to the target
    channel: http
    target: %s/charges
    method: POST
    timeout: 1s
    retry: idempotency_key
    match_window: 10m
`, hex.EncodeToString(sum[:]), tgURL)
}

func TestCampaign(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("campaign seed %d, duration %v (rerun: go test ./test/faults/ -run Campaign -seed %d -duration %v)", seed, *durationFlag, seed, *durationFlag)
	dir := t.TempDir()
	if d := os.Getenv("PORTCULLIS_FAULTS_DIR"); d != "" { // keep the logs and stores
		dir = d
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, pcBin, gws, tg, js := startLedger(t, dir)

	h := &history{start: time.Now(), ops: map[string][]string{}}
	l := &load{gws: gws, tg: tg, acks: &acks{}, hist: h}
	var wg sync.WaitGroup
	for w := range connectWorkers + mcpWorkers {
		r := rand.New(rand.NewPCG(seed, uint64(w+1)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w < connectWorkers {
				l.connectWorker(w, r)
			} else {
				l.mcpWorker(w, r)
			}
		}()
	}

	faults := inject(t, seed, *durationFlag, c, gws, js, l.acks)
	l.stop.Store(true)
	wg.Wait()
	if len(l.acks.snapshot()) == 0 {
		t.Fatalf("seed %d: no operation was acknowledged in %v", seed, *durationFlag)
	}
	t.Logf("%d operations, %d acknowledged calls, %d agent connections cut, %d faults", l.ops.Load(), len(l.acks.snapshot()), l.acks.cuts.Load(), len(faults))

	// Everything healed: every node and gateway up.
	for i, n := range c.nodes {
		if !n.running() {
			n.start(t)
		}
		c.waitNode(t, i)
	}
	for _, g := range gws {
		if !g.running() {
			g.start(t)
		}
		g.waitUp(t)
	}
	r := check(t, seed, c, pcBin, l, faults)
	table := r.table(faults, l)
	t.Logf("results (seed %d, %v):\n%s", seed, *durationFlag, table)
	if out := os.Getenv("PORTCULLIS_FAULTS_REPORT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// inject runs faults one after another, chosen from the seed, until
// duration has passed; each is healed and waited out before the next.
func inject(t *testing.T, seed uint64, duration time.Duration, c *cluster, gws []*gateway, js jetstream.JetStream, a *acks) []*fault {
	r := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()
	t0 := time.Now()
	end := t0.Add(duration)
	var faults []*fault
	jitter := func(min, spread time.Duration) time.Duration { return min + time.Duration(r.Int64N(int64(spread))) }
	var round []faultKind // every kind once per round, in a seeded order
	for time.Now().Add(pauseMin).Before(end) {
		time.Sleep(jitter(time.Second, 2*time.Second)) // the clients work undisturbed a moment
		if len(round) == 0 {
			round = append(round, faultKinds...)
			r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		f := &fault{kind: round[0], start: time.Now()}
		round = round[1:]
		switch f.kind {
		case faultGatewayKill:
			i := r.IntN(len(gws))
			f.what = gws[i].name
			gws[i].kill()
			time.Sleep(jitter(500*time.Millisecond, 2*time.Second))
			gws[i].start(t)
			gws[i].waitUp(t)
		case faultLeaderKill:
			i := c.leader(ctx, js)
			if i < 0 {
				i = r.IntN(nodes)
			}
			f.what = c.nodes[i].name
			c.nodes[i].kill()
			// wait (bounded) for a new leader among the survivors
			for deadline := time.Now().Add(recoverWaitMax); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if l := c.leader(ctx, js); l >= 0 && l != i {
					break
				}
			}
			time.Sleep(jitter(500*time.Millisecond, 2*time.Second))
			c.nodes[i].start(t)
			c.waitNode(t, i)
		case faultNodePause:
			i := c.leader(ctx, js) // the leader: pausing it forces an election
			if i < 0 {
				i = r.IntN(nodes)
			}
			f.what = c.nodes[i].name
			c.nodes[i].signal(syscall.SIGSTOP)
			time.Sleep(jitter(pauseMin, 3*time.Second))
			c.nodes[i].signal(syscall.SIGCONT)
		case faultPartition:
			i := c.leader(ctx, js) // the leader cut off: the majority elects another
			if i < 0 {
				i = r.IntN(nodes)
			}
			f.what = c.nodes[i].name
			c.nodes[i].kill()
			c.nodes[i].args = []string{"-c", c.isolated[i]}
			c.nodes[i].start(t)
			time.Sleep(jitter(pauseMin, 3*time.Second))
			c.nodes[i].kill()
			c.nodes[i].args = []string{"-c", c.conf[i]}
			c.nodes[i].start(t)
			c.waitNode(t, i)
		case faultCorrupt:
			i := (c.leader(ctx, js) + 1 + r.IntN(nodes-1)) % nodes // a follower: a minority of one
			f.what = c.nodes[i].name
			c.nodes[i].kill()
			f.what += " " + corrupt(t, r, c.store[i])
			c.corrupted[i] = true
			c.nodes[i].start(t)
			c.waitNode(t, i)
		}
		f.healed = time.Now()
		for deadline := f.healed.Add(recoverWaitMax); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if a.lastAfter(f.healed) {
				f.recovered = true
				break
			}
		}
		f.end = time.Now()
		t.Logf("fault %-38s %-4s at %6.1fs, healed after %5.1fs, recovered %v", f.kind, f.what,
			f.start.Sub(t0).Seconds(), f.healed.Sub(f.start).Seconds(), f.recovered)
		faults = append(faults, f)
	}
	time.Sleep(time.Until(end)) // the clients work to the end
	return faults
}

// gaps fills each fault's longest stretch without an acknowledged
// operation inside [start, end].
func gaps(faults []*fault, list []ack) {
	for _, f := range faults {
		last := f.start
		for _, a := range list {
			if a.at.Before(f.start) || a.at.After(f.end) {
				continue
			}
			if d := a.at.Sub(last); d > f.gap {
				f.gap = d
			}
			last = a.at
		}
		if d := f.end.Sub(last); d > f.gap {
			f.gap = d
		}
	}
}

// windowOf is the fault whose window holds t (nil: none).
func windowOf(faults []*fault, t time.Time) *fault {
	for _, f := range faults {
		if !t.Before(f.start) && !t.After(f.end) {
			return f
		}
	}
	return nil
}

func (r *results) table(faults []*fault, l *load) string {
	gaps(faults, l.acks.snapshot())
	type row struct {
		injected, recovered, acked, lost, dup int
		unavail                               time.Duration
	}
	rows := map[faultKind]*row{}
	order := append(append([]faultKind{}, faultKinds...), faultAgentCut, "(no fault window)")
	for _, k := range order {
		rows[k] = &row{}
	}
	for _, f := range faults {
		rw := rows[f.kind]
		rw.injected++
		if f.recovered {
			rw.recovered++
		}
		rw.unavail += f.gap
	}
	rows[faultAgentCut].injected = int(l.acks.cuts.Load())
	for _, a := range l.acks.snapshot() {
		k := faultKind("(no fault window)")
		if f := windowOf(faults, a.at); f != nil {
			k = f.kind
		}
		rows[k].acked++
	}
	for _, p := range r.problems {
		k := faultKind("(no fault window)")
		if f := windowOf(faults, p.at); f != nil {
			k = f.kind
		}
		if p.lost {
			rows[k].lost++
		} else {
			rows[k].dup++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | injected | ops acknowledged | lost | duplicated | unavailable s | recovered |\n|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		rw := rows[k]
		rec := fmt.Sprintf("%d/%d", rw.recovered, rw.injected)
		un := fmt.Sprintf("%.1f", rw.unavail.Seconds())
		if k == faultAgentCut || k == "(no fault window)" {
			rec, un = "-", "-"
		}
		inj := fmt.Sprint(rw.injected)
		if k == "(no fault window)" {
			inj = "-"
		}
		lost := fmt.Sprint(rw.lost)
		if k == faultCorrupt && r.replicaLost > 0 {
			lost += fmt.Sprintf(" (%d messages on the corrupted replica)", r.replicaLost)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %s | %s |\n", k, inj, rw.acked, lost, rw.dup, un, rec)
	}
	fmt.Fprintf(&b, "\nAgent cuts happen throughout (every window); their acknowledged operations are counted in the window they fell in.\n")
	fmt.Fprintf(&b, "Checked: %d executions, %d events, %d target requests (%d keys), %d orphaned dispatches resolved OUTCOME_UNKNOWN, decisions linearizable (porcupine): %s, live views: %s, audit verify %s, the 3 replicas of the executions stream agree: %s.\n",
		r.executions, r.events, r.sends, r.keys, r.orphans, r.linear, r.views, r.audit, r.replicas)
	return b.String()
}

// corrupt flips one bit in, or truncates, the last message block of the
// executions stream in a stopped node's store, and says what it did.
func corrupt(t *testing.T, r *rand.Rand, store string) string {
	blocks, _ := filepath.Glob(filepath.Join(store, "jetstream", "LEDGER", "streams", "PORTCULLIS_EXECUTIONS", "msgs", "*.blk"))
	if len(blocks) == 0 {
		return "(no block to corrupt)"
	}
	sort.Strings(blocks)
	p := blocks[len(blocks)-1]
	b, err := os.ReadFile(p)
	if err != nil || len(b) < 2 {
		return "(empty block)"
	}
	if r.IntN(2) == 0 {
		off := r.IntN(len(b))
		b[off] ^= 1 << r.IntN(8)
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("bit flip at %d of %s", off, filepath.Base(p))
	}
	cut := 1 + r.IntN(min(len(b)-1, 4096))
	if err := os.Truncate(p, int64(len(b)-cut)); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d bytes truncated from %s", cut, filepath.Base(p))
}

// startLedger starts the cluster's nodes, sets up the ledger's streams as
// admin (`portcullis streams`), and starts the gateways against an HTTP
// target of their tools; js is an admin connection.
func startLedger(t *testing.T, dir string) (c *cluster, pcBin string, gws []*gateway, tg *target, js jetstream.JetStream) {
	t.Helper()
	natsBin, pcBin := buildBinaries(t, dir)
	c = startCluster(t, natsBin, dir)
	if out, err := runCmd(pcBin, "streams", "--nats-url", c.urls(), "--nats-creds", c.creds(natsauth.Admin), "--exec-shards", fmt.Sprint(*execShards)); err != nil {
		t.Fatalf("portcullis streams: %v\n%s", err, out)
	}
	tg = newTarget()
	t.Cleanup(tg.Close)
	cfg := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(campaignConfig(tg.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	gws = startGateways(t, pcBin, dir, cfg, fpKey, c)
	js, err := jetstream.New(c.connect(t, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	return c, pcBin, gws, tg, js
}
