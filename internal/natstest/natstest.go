// Package natstest starts real NATS servers with JetStream (file storage,
// fsync on every write) in a test's temp dir: one server, or a cluster of
// several in this process. The servers require authentication with the
// ledger's users (package natsauth); no mocks.
package natstest

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/portcullis-dev/portcullis/internal/freeport"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
)

const readyWaitMax = 30 * time.Second

// TestStreams are the streams the test users' permissions name: the
// ledger's production names (tests of the server package see the real
// permissions through it), plus the ledger/jetstream tests' own stream.
var TestStreams = natsauth.Streams{
	All:    []string{"PORTCULLIS_EXECUTIONS", "PORTCULLIS_BUDGET", "PORTCULLIS_AUDIT", "PORTCULLIS_SESSIONS", "PORTCULLIS_MCP_STREAMS", "PORTCULLIS_META", "TEST_EVENTS"},
	Budget: "PORTCULLIS_BUDGET",
}

// Start runs a server on 127.0.0.1 and an admin connection to it; both
// stop when the test ends.
func Start(t testing.TB) (*natsserver.Server, *nats.Conn) {
	t.Helper()
	ns, dir := StartAuth(t)
	return ns, Connect(t, ns.ClientURL(), dir, natsauth.Admin)
}

// StartAuth runs a server whose users' credential files are in the
// returned directory (natsauth.Path(dir, role)).
func StartAuth(t testing.TB) (*natsserver.Server, string) {
	t.Helper()
	dir := t.TempDir()
	users := users(t, dir)
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, SyncAlways: true, Nkeys: users,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(readyWaitMax) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns, dir
}

func users(t testing.TB, dir string) []*natsserver.NkeyUser {
	t.Helper()
	if err := natsauth.EnsureFiles(dir); err != nil {
		t.Fatal(err)
	}
	u, err := natsauth.Users(dir, TestStreams)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Connect opens a connection to url as role (credentials from dir, the
// role's inbox prefix), closed when the test ends.
func Connect(t testing.TB, url, dir string, role natsauth.Role) *nats.Conn {
	t.Helper()
	auth, err := natsauth.ClientOption(natsauth.Path(dir, role))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, auth, natsauth.Inbox(role), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Cluster is a JetStream cluster of servers in this process, on fixed
// 127.0.0.1 ports so a node restarts where it was.
type Cluster struct {
	t        testing.TB
	mu       sync.Mutex
	servers  []*natsserver.Server
	opts     []func() *natsserver.Options
	CredsDir string // credential files of the ledger's users (natsauth.Path)
}

// ClusterOptions tune the nodes of a test cluster.
type ClusterOptions struct {
	NoSync bool // the nodes do not fsync every write
}

// StartCluster starts n nodes named n0…n(n-1), each with a client port,
// a route port and a monitoring port, and waits for a JetStream meta
// leader. With n == 1 the node runs alone (no cluster block).
func StartCluster(t testing.TB, n int, co ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t, CredsDir: t.TempDir()}
	users := users(t, c.CredsDir)
	client, route, monitor := freeport.Take(t, n), freeport.Take(t, n), freeport.Take(t, n)
	var routes []string
	for i := range n {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(route[i]))
	}
	for i := range n {
		store := t.TempDir()
		c.opts = append(c.opts, func() *natsserver.Options {
			o := &natsserver.Options{
				ServerName: "n" + strconv.Itoa(i), Host: "127.0.0.1", Port: client[i], HTTPHost: "127.0.0.1", HTTPPort: monitor[i],
				JetStream: true, StoreDir: store, NoSigs: true, SyncAlways: !co.NoSync, Nkeys: users,
			}
			if n > 1 { // one node runs alone
				o.Cluster = natsserver.ClusterOpts{Name: "pc", Host: "127.0.0.1", Port: route[i]}
				o.Routes = natsserver.RoutesFromStr(strings.Join(routes, ","))
			}
			return o
		})
		c.servers = append(c.servers, nil)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); c.Start(i) }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range n {
			c.Stop(i)
		}
	})
	c.WaitMetaLeader()
	return c
}

// Start (re)starts node i.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	ns, err := natsserver.NewServer(c.opts[i]())
	if err != nil {
		c.t.Error(err)
		return
	}
	ns.Start()
	if !ns.ReadyForConnections(readyWaitMax) {
		c.t.Error("nats node not ready")
		return
	}
	c.mu.Lock()
	c.servers[i] = ns
	c.mu.Unlock()
}

// Stop shuts node i down (its store stays).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	ns := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// Server is node i (nil while stopped).
func (c *Cluster) Server(i int) *natsserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// URL is node i's client URL; URLs lists every node's, comma-separated.
func (c *Cluster) URL(i int) string {
	return "nats://127.0.0.1:" + strconv.Itoa(c.opts[i]().Port)
}

// URLs is every node's client URL, comma-separated (the gateway's seeds).
func (c *Cluster) URLs() string {
	var u []string
	for i := range c.opts {
		u = append(u, c.URL(i))
	}
	return strings.Join(u, ",")
}

// MonitorURL is node i's monitoring endpoint.
func (c *Cluster) MonitorURL(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(c.opts[i]().HTTPPort)
}

// WaitMetaLeader waits (bounded) until a running node leads JetStream's
// meta group.
func (c *Cluster) WaitMetaLeader() {
	c.t.Helper()
	deadline := time.Now().Add(readyWaitMax)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, ns := range c.servers {
			if ns != nil && ns.JetStreamIsLeader() {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	c.t.Fatal("no JetStream meta leader")
}
