package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// Benchmarks run at fsync-always on the embedded JetStream with real Pebble
// views. Each reports decisions/s and p50/p99 latency per operation.
//
//	go test ./test/ -run '^$' -bench . -benchtime 20000x

var benchCallers = []int{1, 4, 16, 64, 256}

// runCallers splits b.N operations among callers goroutines and reports
// throughput (decisions/s) and latency percentiles.
func runCallers(b *testing.B, callers int, op func(caller, i int) error) {
	b.Helper()
	runCallersUnit(b, callers, "decisions/s", op)
}

// runCallersUnit is runCallers reporting throughput in unit.
func runCallersUnit(b *testing.B, callers int, unit string, op func(caller, i int) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failed error
	b.ResetTimer()
	start := time.Now()
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(c, i); err != nil {
					failMu.Lock()
					failed = err
					failMu.Unlock()
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	reportLatency(b, elapsed, unit, slices.Concat(lat...))
}

func reportLatency(b *testing.B, elapsed time.Duration, unit string, all []time.Duration) {
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(float64(len(all))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), unit)
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func benchGateway(b *testing.B) *server.Gateway {
	b.Helper()
	g, err := server.Start(context.Background(), server.Options{
		DataDir: b.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(b), FingerprintKey: testKey,
		NatsListen: "127.0.0.1:-1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(context.Background()) })
	registerCreds(g)
	return g
}

func benchAction(i int, run string) fingerprint.Action {
	return fingerprint.Action{
		Actor: "agent-7", Tool: "create_payment", Channel: "http", Target: "payments.example.com/v1/charges",
		Method: "POST", IntentScope: run,
		Arguments: []byte(`{"amount":` + strconv.Itoa(1000+i) + `,"currency":"GBP","customer":"cus_4711","description":"order ` + strconv.Itoa(i) + `"}`),
	}
}

// BenchmarkRawCeiling is the ceiling measured the way the ledger uses
// it: the same callers, each waiting for one message shaped as a Begin's
// ACCEPTED event (benchkit.RawEvent bytes, a subject as long as the
// ledger's, the compare-and-set header on its intent's filter), over 1 or 4
// file streams. grouped:
// each stream's committer sends what is pending (never more than there are
// callers) as one atomic batch, or as pipelined publishes when the ledger's
// pipeline or fewer are pending, its batches staged as the ledger's
// (benchkit.Stager); plain: each caller publishes on its own.
func BenchmarkRawCeiling(b *testing.B) {
	for _, streams := range []int{1, 4} {
		for _, mode := range []benchkit.Mode{benchkit.Grouped, benchkit.Plain} {
			for _, callers := range benchCallers {
				b.Run(fmt.Sprintf("streams=%d/%s/callers=%d", streams, mode, callers), func(b *testing.B) {
					g := benchGateway(b)
					r, err := benchkit.NewRaw(context.Background(), natsConnect(b, g, natsauth.Admin), streams, callers, mode, g.StageInMemory)
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					runCallersUnit(b, callers, "appends/s", func(c, _ int) error { return r.Append(c) })
				})
			}
		}
	}
}

// BenchmarkBeginNew: every call is a new intent (claim + accepted event,
// one atomic decision), in-process through ledger.Service.
func BenchmarkBeginNew(b *testing.B) {
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			g := benchGateway(b)
			run := "run:" + nuid.Next()
			runCallers(b, callers, func(_, i int) error {
				res, err := g.Ledger.Begin(context.Background(), ledger.BeginInput{Action: benchAction(i, run)})
				if err == nil && res.Decision != pb.Decision_DECISION_NEW {
					err = fmt.Errorf("decision %v", res.Decision)
				}
				return err
			})
		})
	}
}

// BenchmarkBeginAttach: retries of known intents (1024 of them, each caller
// cycling through its own), each appending an attach event under CAS.
func BenchmarkBeginAttach(b *testing.B) {
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			g := benchGateway(b)
			run := "run:" + nuid.Next()
			const intents = 1024
			for i := range intents {
				if _, err := g.Ledger.Begin(context.Background(), ledger.BeginInput{Action: benchAction(i, run)}); err != nil {
					b.Fatal(err)
				}
			}
			per := max(1, intents/callers)
			runCallers(b, callers, func(c, i int) error {
				k := (c*per + i%per) % intents
				res, err := g.Ledger.Begin(context.Background(), ledger.BeginInput{Action: benchAction(k, run)})
				if err == nil && res.Decision != pb.Decision_DECISION_ATTACHED {
					err = fmt.Errorf("decision %v", res.Decision)
				}
				return err
			})
		})
	}
}

// BenchmarkBeginConnect: new-intent Begin over Connect (HTTP/1.1 JSON-free
// protobuf), 64 callers.
func BenchmarkBeginConnect(b *testing.B) {
	g := benchGateway(b)
	c := client(g)
	run := "run:" + nuid.Next()
	runCallers(b, 64, func(_, i int) error {
		a := benchAction(i, run)
		req := beginReq("create_payment", nil, "", strconv.Itoa(i))
		req.Msg.Action.IntentScope = a.IntentScope
		req.Msg.Action.Arguments = args(b, map[string]any{"amount": 1000 + i, "currency": "GBP", "customer": "cus_4711"})
		_, err := c.Begin(context.Background(), req)
		return err
	})
}

// BenchmarkSingleCASAppend is the baseline without group commit: one
// JetStream publish with a CAS header per decision.
func BenchmarkSingleCASAppend(b *testing.B) {
	for _, callers := range []int{4, 64, 256} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			g := benchGateway(b)
			nc := natsConnect(b, g, natsauth.Admin)
			js, _ := jetstream.New(nc)
			if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 300)
			runCallers(b, callers, func(_, _ int) error {
				_, err := js.Publish(context.Background(), "raw."+nuid.Next(), payload, jetstream.WithExpectLastSequencePerSubject(0))
				return err
			})
		})
	}
}
