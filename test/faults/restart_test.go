package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A gateway restarted while the node leading the meta stream hangs
// (SIGSTOP) comes up: it names the node whose monitoring endpoint does not
// answer instead of refusing to start (one lost node stopped every
// gateway's restart), and waits for the meta stream's next leader instead
// of failing (a campaign run saw a restart end with "share fingerprint
// key: nats: no response from stream": the fingerprint key's records and
// the enrollment were written without the retries the streams' setup has).
// The second restart meets the election only when the reads before those
// writes do not wait it out themselves (they ask the hung leader first):
// with the writes unretried it failed in about half the runs, so it is no
// canary; the first restart fails every time without the monitor fix.
func TestGatewayRestartsWhileMetaLeaderHangs(t *testing.T) {
	c, _, gws, _, js := startLedger(t, t.TempDir())
	gw := gws[0]
	args := gw.args

	// Every monitoring endpoint listed, the hung node's too: the gateway
	// waits out its /varz, warns, and starts.
	leader := hangMetaStreamLeader(t, c, js)
	gw.kill()
	gw.start(t)
	gw.waitUp(t)
	c.nodes[leader].signal(syscall.SIGCONT)
	c.waitNode(t, leader) // caught up again

	// Only the live nodes' endpoints: nothing waits before the meta
	// stream's writes, which meet its election.
	leader = hangMetaStreamLeader(t, c, js)
	var live []string
	for i, p := range c.monitor {
		if i != leader {
			live = append(live, "http://127.0.0.1:"+strconv.Itoa(p))
		}
	}
	gw.kill()
	gw.args = append(slices.Clone(args), "--nats-monitor-url", strings.Join(live, ","))
	gw.start(t)
	gw.waitUp(t)
	c.nodes[leader].signal(syscall.SIGCONT)
}

// hangMetaStreamLeader SIGSTOPs the node leading the meta stream, first
// moving every other leadership off it (JetStream's meta group, the other
// streams): a hung leader of those would hold the gateway's start for
// their elections, and the meta stream's would be over before its writes.
// It returns the node.
func hangMetaStreamLeader(t *testing.T, c *cluster, js jetstream.JetStream) int {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		node := streamLeader(t, js, "PORTCULLIS_META")
		if node == jetStreamLeader(t, c) {
			stepDown(t, js, "PORTCULLIS_META")
			continue
		}
		alone := true
		for name := range js.StreamNames(context.Background()).Name() {
			if name != "PORTCULLIS_META" && streamLeader(t, js, name) == node {
				stepDown(t, js, name)
				alone = false
			}
		}
		if !alone || streamLeader(t, js, "PORTCULLIS_META") != node || jetStreamLeader(t, c) == node {
			continue // look again: leaderships moved meanwhile
		}
		c.nodes[node].signal(syscall.SIGSTOP)
		t.Cleanup(func() { c.nodes[node].signal(syscall.SIGCONT) })
		return node
	}
	t.Fatal("no node led the meta stream alone")
	return -1
}

// stepDown asks the stream's leader to hand over, and waits for the next.
func stepDown(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	if _, err := js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the next leader's election
}

// streamLeader is the node leading the stream (bounded wait for one: a
// node just resumed may leave a request unanswered while it catches up).
func streamLeader(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	deadline := time.Now().Add(readyWaitMax)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, stream)
		cancel()
		if err == nil && s.CachedInfo().Cluster != nil {
			for i := range nodes {
				if s.CachedInfo().Cluster.Leader == fmt.Sprintf("n%d", i) {
					return i
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no leader within %v: %v", stream, readyWaitMax, err)
		}
		time.Sleep(100 * time.Millisecond) // no leader yet
	}
}

// jetStreamLeader is the node leading JetStream's meta group, as the
// nodes' monitoring endpoints report it (bounded wait for one that knows).
func jetStreamLeader(t *testing.T, c *cluster) int {
	t.Helper()
	hc := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, port := range c.monitor {
			res, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", port))
			if err != nil {
				continue // hung or down
			}
			var jsz struct {
				Meta struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			err = json.NewDecoder(res.Body).Decode(&jsz)
			res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			for i := range nodes {
				if jsz.Meta.Leader == fmt.Sprintf("n%d", i) {
					return i
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // no leader known yet
	}
	t.Fatal("no node reports a JetStream meta leader")
	return -1
}
