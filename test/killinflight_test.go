package test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// SIGKILL while writes are in flight (not after the last acknowledgement):
// every Begin the gateway acknowledged before it died is in the ledger
// after a restart, in the state it was acknowledged in. (A process kill
// leaves the page cache; TestEmbeddedServerSyncsEveryWrite checks that the
// server fsyncs every write.)
func TestSIGKILLWithWritesInFlight(t *testing.T) {
	ctx := context.Background()
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	proc := serveProcess(t, dataDir, addr, cfg)
	c := portcullisv1connect.NewExecutionServiceClient(http.DefaultClient, "http://"+addr)

	const writers, killAfter = 8, 150
	var (
		mu       sync.Mutex
		acked    []string
		inflight atomic.Int32
		next     atomic.Int32
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	killNow := make(chan struct{})
	var once sync.Once
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := next.Add(1)
				inflight.Add(1)
				res, err := c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": fmt.Sprint("k", i)}), "", fmt.Sprint(i)))
				inflight.Add(-1)
				if err != nil {
					return // the gateway died under this call: not acknowledged
				}
				mu.Lock()
				acked = append(acked, res.Msg.GetExecution().GetExecutionId())
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					once.Do(func() { close(killNow) })
				}
			}
		}()
	}
	<-killNow
	waitFor(t, "calls in flight at the kill", func() bool { return inflight.Load() > 0 })
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	_, _ = proc.Process.Wait()
	wg.Wait() // every answer that arrived (also just before the kill) is an acknowledgement
	ackedAtKill := acked

	serveProcess(t, dataDir, addr, cfg)
	for _, id := range ackedAtKill {
		res, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
		if err != nil {
			t.Fatalf("acknowledged execution %s lost: %v", id, err)
		}
		if st := res.Msg.GetExecution().GetState(); st != pb.State_STATE_ACCEPTED {
			t.Fatalf("%s is %v after restart, want ACCEPTED", id, st)
		}
	}
	if len(ackedAtKill) < killAfter {
		t.Fatalf("only %d acknowledged before the kill", len(ackedAtKill))
	}
}
