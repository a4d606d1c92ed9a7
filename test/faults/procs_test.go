package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/internal/freeport"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/ledger"
)

const (
	nodes        = 3
	readyWaitMax = 90 * time.Second // a node or gateway coming up on a loaded machine
	// exampleConf is the example node configuration whose users and
	// permissions the campaign's nodes run with.
	exampleConf = "../../examples/nats-server.conf"
)

// The example configuration's public nkeys, in natsauth.Roles order
// (gateway, finance, analyst, admin): replaced by freshly generated ones.
var exampleNkeys = []string{
	"UC6SA4FJUVGFXOOJJNBH4XK3FDGC3I7VP7EDICVYQ5NS6K4Z2JNDHPQS",
	"UA6DWDGLXEXZPQZ6NJXQVHRXSSCDVCJDJTXXPRKOL4QZ33URPTCKSIMF",
	"UAWRVVLJQLTLBUHIEA7UUZQ4LVUNXNNC6QLCPMVLLH3K5UZRNH3BZIVR",
	"UDMHC7CORTVX7Z7DX5NLRH3XP6IUJQOYMX5GC2NCNNPCAKWVAC2UIMPY",
}

// buildBinaries builds nats-server (from the module graph: no download)
// and portcullis into dir.
func buildBinaries(t testing.TB, dir string) (natsBin, pcBin string) {
	t.Helper()
	natsBin, pcBin = filepath.Join(dir, "nats-server"), filepath.Join(dir, "portcullis")
	for _, b := range [][2]string{{natsBin, "github.com/nats-io/nats-server/v2"}, {pcBin, "github.com/portcullis-dev/portcullis/cmd/portcullis"}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", b[1], err, out)
		}
	}
	return natsBin, pcBin
}

// proc is one child process that can be killed, paused and restarted.
type proc struct {
	name string
	args []string
	bin  string
	log  *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done, p.paused = cmd, done, false
	fmt.Fprintf(p.log, "=== campaign: started %s pid %d\n", p.name, cmd.Process.Pid)
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process dies too
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	fmt.Fprintf(p.log, "=== campaign: SIGKILLed %s\n", p.name)
}

func (p *proc) signal(s syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(s)
		p.paused = s == syscall.SIGSTOP
		fmt.Fprintf(p.log, "=== campaign: %v %s\n", s, p.name)
	}
}

// exited reports whether the process started last has ended.
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// cluster is three nats-server processes and the ledger's credentials.
type cluster struct {
	credsDir  string
	client    []int
	monitor   []int
	nodes     []*proc
	conf      []string     // each node's configuration
	isolated  []string     // the same with the routes to nowhere (a partition)
	store     []string     // each node's JetStream store
	corrupted map[int]bool // nodes whose store a fault corrupted
}

func (c *cluster) url(i int) string { return "nats://127.0.0.1:" + strconv.Itoa(c.client[i]) }

func (c *cluster) urls() string {
	var u []string
	for i := range c.client {
		u = append(u, c.url(i))
	}
	return strings.Join(u, ",")
}

func (c *cluster) monitorURLs() string {
	var u []string
	for _, p := range c.monitor {
		u = append(u, "http://127.0.0.1:"+strconv.Itoa(p))
	}
	return strings.Join(u, ",")
}

func (c *cluster) creds(r natsauth.Role) string { return natsauth.Path(c.credsDir, r) }

// startCluster writes a configuration per node from the example's (its
// users with fresh nkeys, sync always, routes to the three nodes on
// 127.0.0.1) and starts the nodes.
func startCluster(t testing.TB, natsBin, dir string) *cluster {
	t.Helper()
	c := &cluster{credsDir: filepath.Join(dir, "creds"), client: freeport.Take(t, nodes), monitor: freeport.Take(t, nodes), corrupted: map[int]bool{}}
	route := freeport.Take(t, nodes)
	elsewhere := freeport.Take(t, nodes+1) // an isolated node's route listener, and a port nobody listens on
	if err := natsauth.EnsureFiles(c.credsDir); err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.Users(c.credsDir, natstest.TestStreams)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(exampleConf)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range route {
		routes = append(routes, "    nats-route://127.0.0.1:"+strconv.Itoa(p))
	}
	for i := range nodes {
		conf := string(example)
		for r, u := range users {
			conf = strings.Replace(conf, exampleNkeys[r], u.Nkey, 1)
		}
		store := filepath.Join(dir, fmt.Sprintf("n%d", i), "jetstream")
		for _, rep := range [][2]string{
			{"server_name: n1", fmt.Sprintf("server_name: n%d", i)},
			{"listen: 0.0.0.0:4222", fmt.Sprintf("listen: 127.0.0.1:%d", c.client[i])},
			{"http: 0.0.0.0:8222", fmt.Sprintf("http: 127.0.0.1:%d", c.monitor[i])},
			{"store_dir: /var/lib/nats/jetstream", "store_dir: " + strconv.Quote(store)},
			{"listen: 0.0.0.0:6222", fmt.Sprintf("listen: 127.0.0.1:%d", route[i])},
			{"    nats-route://n1.internal:6222\n    nats-route://n2.internal:6222\n    nats-route://n3.internal:6222", strings.Join(routes, "\n")},
		} {
			if !strings.Contains(conf, rep[0]) {
				t.Fatalf("the example configuration has no %q", rep[0])
			}
			conf = strings.Replace(conf, rep[0], rep[1], 1)
		}
		path := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		// Partitioned: the node listens for routes where nobody dials and
		// dials where nobody listens; its clients still reach it.
		iso := strings.Replace(conf, fmt.Sprintf("listen: 127.0.0.1:%d", route[i]), fmt.Sprintf("listen: 127.0.0.1:%d", elsewhere[i]), 1)
		iso = strings.Replace(iso, strings.Join(routes, "\n"), fmt.Sprintf("    nats-route://127.0.0.1:%d", elsewhere[nodes]), 1)
		isoPath := filepath.Join(dir, fmt.Sprintf("n%d-isolated.conf", i))
		if err := os.WriteFile(isoPath, []byte(iso), 0o600); err != nil {
			t.Fatal(err)
		}
		c.conf, c.isolated, c.store = append(c.conf, path), append(c.isolated, isoPath), append(c.store, store)
		lf, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lf.Close() })
		c.nodes = append(c.nodes, &proc{name: fmt.Sprintf("n%d", i), bin: natsBin, args: []string{"-c", path}, log: lf})
	}
	for _, n := range c.nodes {
		n.start(t)
		t.Cleanup(n.kill)
	}
	for i := range nodes {
		c.waitNode(t, i)
	}
	return c
}

// waitNode waits (bounded) until node i answers /healthz.
func (c *cluster) waitNode(t testing.TB, i int) {
	t.Helper()
	deadline := time.Now().Add(readyWaitMax)
	for time.Now().Before(deadline) {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.monitor[i]))
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the node's health
	}
	t.Fatalf("nats node n%d not healthy after %v; its log's last lines:\n%s", i, readyWaitMax, logTail(c.nodes[i].log.Name()))
}

// admin is a connection as the NATS admin (stream leaders, state).
func (c *cluster) connect(t testing.TB, r natsauth.Role) *nats.Conn {
	t.Helper()
	auth, err := natsauth.ClientOption(c.creds(r))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.urls(), auth, natsauth.Inbox(r), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// leader is the node index leading the executions stream ($JS.API.STREAM.INFO
// as admin), or -1.
func (c *cluster) leader(ctx context.Context, js jetstream.JetStream) int {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		return -1
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		return -1
	}
	for i := range nodes {
		if info.Cluster.Leader == fmt.Sprintf("n%d", i) {
			return i
		}
	}
	return -1
}

// gateway is one `portcullis serve` process.
type gateway struct {
	*proc
	addr string
}

func (g *gateway) connect() portcullisv1connect.ExecutionServiceClient {
	return portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+g.addr)
}

// waitUp waits (bounded) until the gateway answers a read, and fails at
// once if it exits.
func (g *gateway) waitUp(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyWaitMax)
	c := g.connect()
	for time.Now().Before(deadline) {
		if g.exited() {
			t.Fatalf("gateway %s exited before it came up (log %s); its last lines:\n%s", g.name, g.log.Name(), logTail(g.log.Name()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListExecutions(ctx, connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1}))
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling the gateway
	}
	t.Fatalf("gateway %s did not come up within %v (log %s); its last lines:\n%s", g.name, readyWaitMax, g.log.Name(), logTail(g.log.Name()))
}

// logTail is the end of a process's log (the last 4 KiB), for a failure
// message: the test's temp dir, and the log with it, is gone once it ends.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

func startGateways(t testing.TB, pcBin, dir, cfg, fpKey string, c *cluster) []*gateway {
	t.Helper()
	addrs := freeport.Take(t, nodes)
	var gws []*gateway
	for i := range nodes {
		dataDir := filepath.Join(dir, fmt.Sprintf("gw%d", i))
		args := []string{"serve", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", addrs[i]), "--config", cfg,
			"--nats-url", c.urls(), "--nats-creds", c.creds(natsauth.Gateway), "--nats-monitor-url", c.monitorURLs(),
			"--fingerprint-key", fpKey, "--gateway-id", fmt.Sprintf("gw%d", i), "--exec-shards", fmt.Sprint(*execShards)}
		if i > 0 { // the first gateway created the ledger's root key; the others enroll with it
			args = append(args, "--root-key", filepath.Join(dir, "gw0", "root.key"))
		}
		lf, err := os.Create(filepath.Join(dir, fmt.Sprintf("gw%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lf.Close() })
		g := &gateway{proc: &proc{name: fmt.Sprintf("gw%d", i), bin: pcBin, args: args, log: lf}, addr: fmt.Sprintf("127.0.0.1:%d", addrs[i])}
		g.start(t)
		t.Cleanup(g.kill)
		g.waitUp(t) // one at a time: the first creates the root
		gws = append(gws, g)
	}
	return gws
}

// runCmd runs a portcullis command and returns its combined output.
func runCmd(pcBin string, args ...string) (string, error) {
	out, err := exec.Command(pcBin, args...).CombinedOutput()
	return string(out), err
}
