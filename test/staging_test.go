package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nuid"
	dto "github.com/prometheus/client_model/go"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// The embedded server stages the execution streams' atomic batches in
// memory (server/staging.go): decisions grouped into batches land and no
// batch is staged on disk for them, while the budget stream's multi-message
// decisions keep nats-server's disk staging; a restart stages in memory
// again, and with --batch-staging disk the execution streams stage on disk.
func TestBatchesStagedInMemory(t *testing.T) {
	dataDir := t.TempDir()
	start := func(staging string) *server.Gateway {
		t.Helper()
		g, err := server.Start(context.Background(), server.Options{
			DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1",
			FingerprintKey: testKey, BatchStaging: staging, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// staged is the batches directory of a stream: nats-server makes it
	// for the first batch it stages on disk and keeps it (each batch's own
	// directory in it goes with its commit).
	staged := func(stream string) string {
		return filepath.Join(dataDir, "jetstream", "jetstream", "$G", "streams", stream, "batches")
	}
	onDisk := func(stream string) bool {
		_, err := os.Stat(staged(stream))
		return err == nil
	}
	run := "run:" + nuid.Next()
	next := 0
	// load makes 64 callers Begin at once, several rounds, so that the
	// committer sends groups as atomic batches; every Begin must land.
	load := func(g *server.Gateway) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					res, err := g.Ledger.Begin(context.Background(), ledger.BeginInput{Action: benchAction(next+c*20+i, run)})
					if err == nil && res.Decision != pb.Decision_DECISION_NEW {
						err = fmt.Errorf("decision %v", res.Decision)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		next += 64 * 20
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	batched := func(g *server.Gateway) {
		t.Helper()
		h := histogram(t, scrape(t, g), "portcullis_commit_group_messages", map[string]string{"stream": ledger.ExecutionsStream})
		if h.GetSampleSum() <= float64(h.GetSampleCount()) {
			t.Fatalf("%v messages in %d commit groups: no group of more than one decision went out", h.GetSampleSum(), h.GetSampleCount())
		}
	}
	// spend makes 64 callers reserve on one account until the keeper has
	// sent a group of their decisions as one atomic batch on the budget
	// stream (its batches directory appears).
	spend := func(g *server.Gateway) {
		t.Helper()
		acct := "acct-" + nuid.Next()
		if _, err := g.Keeper.SetLimit(context.Background(), budget.Limit{Account: acct, Currency: "GBP", Limit: 1 << 50, Delegator: "test"}); err != nil {
			t.Fatal(err)
		}
		for round := 0; !onDisk(keeper.Stream); round++ {
			if round == 50 {
				t.Fatal("no budget decision was staged as an atomic batch in 50 rounds of 64 concurrent reservations on one account")
			}
			var wg sync.WaitGroup
			for c := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					op := fmt.Sprintf("op-%d-%d", round, c)
					if _, _, err := g.Keeper.Reserve(context.Background(), acct, budget.ReserveRequest{OperationKey: op, RequestDigest: "sha256:x", Amount: 1}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	}

	g := start("")
	load(g)
	batched(g)
	spend(g)
	if onDisk(ledger.ExecutionsStream) {
		t.Fatal("the executions stream staged a batch on disk")
	}
	g.Close(context.Background())

	// A restart stages in memory again, and the ledger is whole.
	g = start(server.StagingMemory)
	load(g)
	if onDisk(ledger.ExecutionsStream) {
		t.Fatal("after a restart the executions stream staged a batch on disk")
	}
	if last := streamLast(t, g, ledger.ExecutionsStream); last < uint64(next) {
		t.Fatalf("the executions stream holds %d events after %d Begins", last, next)
	}
	g.Close(context.Background())

	// --batch-staging disk: the server's own staging, batches still land.
	g = start(server.StagingDisk)
	defer g.Close(context.Background())
	load(g)
	batched(g)
	if !onDisk(ledger.ExecutionsStream) {
		t.Fatal("--batch-staging disk: no batch of the executions stream was staged on disk")
	}
}

// A --batch-staging the gateway does not know is refused before anything
// is written.
func TestBatchStagingRefusesUnknownMode(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	_, err := server.Start(context.Background(), server.Options{
		DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), FingerprintKey: testKey,
		BatchStaging: "ram", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err == nil || !strings.Contains(err.Error(), "--batch-staging") {
		t.Fatalf("--batch-staging ram: %v, want a refusal naming the flag", err)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("a refused start made its data dir (%v)", err)
	}
}

// histogram finds the histogram of family name whose labels include want.
func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Histogram {
	t.Helper()
	for _, m := range metrics(fams, name, want) {
		if m.Histogram != nil {
			return m.GetHistogram()
		}
	}
	t.Fatalf("%s%v: no histogram", name, want)
	return nil
}
