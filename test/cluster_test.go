package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/server"
)

// syncBuffer is a log sink tests can read while a gateway writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tail is the buffer's last n bytes (all of it when shorter).
func (s *syncBuffer) tail(n int) string {
	out := s.String()
	return out[max(0, len(out)-n):]
}

// clusterOptions are a gateway's options on a test cluster, as the
// gateway user (the streams are made by the admin first).
func clusterOptions(t testing.TB, c *natstest.Cluster, id string, logs io.Writer) server.Options {
	return server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: c.URLs(),
		NatsCreds: natsauth.Path(c.CredsDir, natsauth.Gateway), FingerprintKey: testKey, GatewayID: id,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
}

// clusterStream is the stream's info once it has a leader (bounded wait:
// on a loaded machine a new replicated stream takes a moment).
func clusterStream(t testing.TB, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	err := ljs.Retry(context.Background(), nil, "stream "+name, func(ctx context.Context) error {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		if info = s.CachedInfo(); info.Cluster == nil || info.Cluster.Leader == "" {
			return context.DeadlineExceeded // no leader yet: try again
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return info
}

func ensureClusterStreams(t testing.TB, c *natstest.Cluster) {
	t.Helper()
	r, err := server.EnsureStreams(context.Background(), server.Options{NatsURL: c.URLs(), NatsCreds: natsauth.Path(c.CredsDir, natsauth.Admin)})
	if err != nil {
		t.Fatal(err)
	}
	if r != 3 {
		t.Fatalf("streams made with %d replicas on a 3-node cluster", r)
	}
}

// On a 3-node cluster every stream, META included, has 3 replicas; a
// gateway's user cannot make them (the admin does), and a gateway given
// every node as a seed keeps deciding after the node it was connected to
// dies.
func TestClusterReplicasAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	c := natstest.StartCluster(t, 3, natstest.ClusterOptions{})
	ctx := context.Background()

	// The gateway user alone cannot set the ledger up.
	o := clusterOptions(t, c, "gw-c0", io.Discard)
	if _, err := server.Start(ctx, o); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("a gateway user set up the streams: %v", err)
	}
	ensureClusterStreams(t, c)

	o = clusterOptions(t, c, "gw-c1", io.Discard)
	o.NatsMonitorURL = c.MonitorURL(0) + "," + c.MonitorURL(1) + "," + c.MonitorURL(2)
	g, err := server.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })

	admin := natstest.Connect(t, c.URLs(), c.CredsDir, natsauth.Admin)
	js, _ := jetstream.New(admin)
	for _, name := range natstest.TestStreams.All {
		if name == "TEST_EVENTS" {
			continue
		}
		info := clusterStream(t, js, name)
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: %d replicas configured, cluster %+v; want 3", name, info.Config.Replicas, info.Cluster)
		}
	}

	// Two gateways race one intent on the cluster (compare-and-set on a
	// replicated subject; a subject whose previous write is still being
	// replicated answers 10164, which backs off): one execution, no errors.
	// The second gateway is enrolled with the first one's root key, as an
	// operator would start it (--root-key).
	o2 := clusterOptions(t, c, "gw-c2", io.Discard)
	o2.RootKey = g.RootKeyPath
	if o2.RootKey == "" {
		t.Fatal("the first gateway on the cluster holds no root key")
	}
	g2, err := server.Start(ctx, o2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g2.Close(context.Background()) })
	a := args(t, map[string]any{"amount": 1200, "race": true})
	var news, attached atomic.Int32
	var wg sync.WaitGroup
	startRace := make(chan struct{})
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startRace
			res, err := client([]*server.Gateway{g, g2}[i%2]).Begin(ctx, beginReq("create_payment", a, "", fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
				return
			}
			switch res.Msg.GetDecision() {
			case pb.Decision_DECISION_NEW:
				news.Add(1)
			case pb.Decision_DECISION_ATTACHED:
				attached.Add(1)
			}
		}()
	}
	close(startRace)
	wg.Wait()
	if news.Load() != 1 || attached.Load() != 63 {
		t.Fatalf("race on the cluster: %d NEW, %d ATTACHED; want 1, 63", news.Load(), attached.Load())
	}

	begin := func(n string) error {
		_, err := client(g).Begin(ctx, beginReq("create_payment", args(t, map[string]any{"n": n}), "op-"+n, n))
		return err
	}
	if err := begin("before"); err != nil {
		t.Fatal(err)
	}
	// Kill the node the gateway is connected to.
	was := g.NatsServer()
	for i := range 3 {
		if c.Server(i) != nil && c.Server(i).Name() == was {
			c.Stop(i)
		}
	}
	// The gateway reconnects to another seed and decides again once the
	// streams have leaders among the two survivors (bounded wait).
	deadline := time.Now().Add(60 * time.Second)
	failures := 0
	for {
		err := begin("after")
		if err == nil {
			break
		}
		failures++
		if time.Now().After(deadline) {
			t.Fatalf("no decision 60 s after the node died (%d failures): %v", failures, err)
		}
	}
	if now := g.NatsServer(); now == was || now == "" {
		t.Fatalf("still connected to %q (was %q)", now, was)
	}
	t.Logf("decided again after the connected node died; %d failed attempts before", failures)
	for i := range 5 {
		if err := begin("later-" + string(rune('a'+i))); err != nil {
			t.Fatalf("decision after failover: %v", err)
		}
	}
}

// A gateway started while the cluster has no JetStream leader retries its
// setup (bounded, with backoff) and starts once a leader is elected.
func TestGatewayStartsDuringElection(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	c := natstest.StartCluster(t, 3, natstest.ClusterOptions{})
	ensureClusterStreams(t, c)
	c.Stop(1)
	c.Stop(2) // no quorum: no meta or stream leader

	logs := &syncBuffer{}
	o := clusterOptions(t, c, "gw-e", logs)
	o.NatsURL = c.URL(0)
	type started struct {
		g   *server.Gateway
		err error
	}
	done := make(chan started, 1)
	go func() {
		g, err := server.Start(context.Background(), o)
		done <- started{g, err}
	}()
	// Wait until the gateway says it is waiting for JetStream.
	deadline := time.After(60 * time.Second)
	for !strings.Contains(logs.String(), "JetStream not ready") {
		select {
		case s := <-done:
			t.Fatalf("the gateway did not wait for a leader: %v\n%s", s.err, logs.String())
		case <-deadline:
			t.Fatalf("no retry logged:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond): // polling the log
		}
	}
	c.Start(1)
	c.Start(2)
	s := <-done
	if s.err != nil {
		t.Fatalf("gateway after the election: %v\n%s", s.err, logs.String())
	}
	t.Cleanup(func() { s.g.Close(context.Background()) })
	res, err := client(s.g).Begin(context.Background(), beginReq("create_payment", args(t, map[string]any{"n": 1}), "op-e", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetDecision() != pb.Decision_DECISION_NEW {
		t.Fatalf("decision %v", res.Msg.GetDecision())
	}
}

// A gateway joining servers that do not fsync every write refuses to
// start unless told --unsafe-no-fsync.
func TestGatewayRefusesClusterWithoutFsync(t *testing.T) {
	c := natstest.StartCluster(t, 1, natstest.ClusterOptions{NoSync: true})
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: c.URL(0), NatsMonitorURL: c.MonitorURL(0),
		NatsCreds: natsauth.Path(c.CredsDir, natsauth.Admin), FingerprintKey: testKey, Replicas: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	_, err := server.Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not fsync every write") || !strings.Contains(err.Error(), "--unsafe-no-fsync") {
		t.Fatalf("joined a cluster without fsync: %v", err)
	}
	o.UnsafeNoFsync = true
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("with --unsafe-no-fsync: %v", err)
	}
	g.Close(context.Background())
}

// Stopping the executions stream's leader node: decisions go on through
// the new leader with nothing failing. (An in-process node shuts down
// gracefully and hands its leadership over; a SIGKILLed leader, where an
// append in flight is resent with its message id until the election is
// over, needs server processes: see docs/nats.md.)
func TestClusterStreamLeaderStop(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	c := natstest.StartCluster(t, 3, natstest.ClusterOptions{})
	ensureClusterStreams(t, c)
	ctx := context.Background()
	admin := natstest.Connect(t, c.URLs(), c.CredsDir, natsauth.Admin)
	js, _ := jetstream.New(admin)
	leader := clusterStream(t, js, "PORTCULLIS_EXECUTIONS").Cluster.Leader
	// Connect the gateway to a node that does not lead the stream.
	o := clusterOptions(t, c, "gw-l", io.Discard)
	for i := range 3 {
		if c.Server(i).Name() != leader {
			o.NatsURL = c.URL(i)
			break
		}
	}
	g, err := server.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	ids := make([]string, 4)
	for i := range ids {
		res, err := client(g).Begin(ctx, beginReq("create_payment", args(t, map[string]any{"n": i}), fmt.Sprint("op-l", i), fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.Msg.GetExecution().GetExecutionId()
	}
	for i := range 3 {
		if c.Server(i) != nil && c.Server(i).Name() == leader {
			c.Stop(i)
		}
	}
	killed := time.Now()
	if _, err := client(g).MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: ids[0]})); err != nil {
		t.Fatalf("MarkDispatched across the leader change: %v", err)
	}
	t.Logf("MarkDispatched sent right after the stream leader stopped landed after %v", time.Since(killed).Round(10*time.Millisecond))
	deadline := time.Now().Add(60 * time.Second)
	var failures int
	for {
		_, err := client(g).Begin(ctx, beginReq("create_payment", args(t, map[string]any{"n": "after"}), "op-l-after", "a"))
		if err == nil {
			break
		}
		failures++
		if time.Now().After(deadline) {
			t.Fatalf("no Begin 60 s after the leader stopped: %v", err)
		}
	}
	t.Logf("first Begin after the leader stopped succeeded %v after it (%d failed attempts)", time.Since(killed).Round(10*time.Millisecond), failures)
	for _, id := range ids[1:] {
		if _, err := client(g).MarkDispatched(ctx, connect.NewRequest(&pb.MarkDispatchedRequest{ExecutionId: id})); err != nil {
			t.Fatalf("MarkDispatched after the new leader: %v", err)
		}
	}
}
