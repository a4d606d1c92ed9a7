package test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
)

// A consumer can vanish under a gateway: an admin's `nats consumer rm`, a
// reader or gateway that learned its name (the permissions cannot tell
// a client's own consumer from another's), a cluster that lost it.
// Deleting every consumer of every stream, again and again, interrupts
// the gateways' reads but stops none: each makes its consumer anew from
// the next sequence it needs, the other gateway's decisions reach the
// views, and readiness holds.
func TestDeletedConsumersStopNoProjector(t *testing.T) {
	ctx := context.Background()
	g1 := startGateway(t, "", nil)
	g2 := startGateway(t, g1.NatsURL, nil)
	js, err := jetstream.New(natsConnect(t, g1, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	deleteAll := func() int {
		n := 0
		for name := range js.StreamNames(ctx).Name() {
			s, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			for c := range s.ListConsumers(ctx).Info() {
				if err := s.DeleteConsumer(ctx, c.Name); err == nil {
					n++
				}
			}
		}
		return n
	}
	list := func() int {
		res, err := client(g1).ListExecutions(ctx, connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1000, Tool: "deploy_release"}))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Msg.GetExecutions())
	}

	deleted := 0
	const rounds = 6
	for round := range rounds {
		deleted += deleteAll()
		if _, err := client(g2).Begin(ctx, beginReq("deploy_release", args(t, map[string]any{"release_id": fmt.Sprint("r", round)}), "", fmt.Sprint(round))); err != nil {
			t.Fatalf("round %d: Begin on the second gateway: %v", round, err)
		}
		deleted += deleteAll()
		deadline := time.Now().Add(15 * time.Second)
		for list() < round+1 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the first gateway's view lists %d executions of the second's %d: a deleted consumer stopped its projector", round, list(), round+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if deleted == 0 {
		t.Fatal("no consumer was deleted: the test proved nothing")
	}
	for _, g := range []string{g1.Addr, g2.Addr} {
		res, err := http.Get("http://" + g + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s /readyz: %d after its consumers were deleted", g, res.StatusCode)
		}
	}
	t.Logf("%d consumers deleted over %d rounds", deleted, rounds)
}
