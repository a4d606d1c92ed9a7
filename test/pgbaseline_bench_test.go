package test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/portcullis-dev/portcullis/internal/pgtest"
)

// pgBaselineSchema is what a user would build instead of the ledger: an
// idempotency table keyed by intent plus an append-only event table.
const pgBaselineSchema = `
CREATE TABLE intents (key text PRIMARY KEY, execution_id text NOT NULL);
CREATE TABLE events (seq bigserial PRIMARY KEY, execution_id text NOT NULL, body bytea NOT NULL);
`

// pgKeySeq keeps intent keys unique across sub-benchmark runs.
var pgKeySeq atomic.Uint64

// BenchmarkPostgresIdempotency is the baseline for Begin: one durable
// decision = one transaction that claims the intent (INSERT ... ON CONFLICT
// DO NOTHING; a conflict would mean attach) and appends the accepted 300-byte
// event, on Postgres 15 with fsync=on and synchronous_commit=on. Every op uses
// a new key (the new-intent case).
func BenchmarkPostgresIdempotency(b *testing.B) {
	dsn := pgtest.Start(b)
	ctx := context.Background()

	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, pgBaselineSchema); err != nil {
		b.Fatal(err)
	}
	var fsync, syncCommit string
	if err := admin.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &syncCommit); err != nil {
		b.Fatal(err)
	}
	if fsync != "on" || syncCommit != "on" {
		b.Fatalf("fsync=%s synchronous_commit=%s, want on/on", fsync, syncCommit)
	}

	body := make([]byte, 300)
	for i := range body {
		body[i] = byte(i)
	}

	for _, callers := range []int{4, 16, 64, 256} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			if _, err := admin.Exec(ctx, "TRUNCATE intents, events RESTART IDENTITY"); err != nil {
				b.Fatal(err)
			}
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				b.Fatal(err)
			}
			cfg.MaxConns = int32(callers)
			cfg.MinConns = int32(callers)
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			// Open every connection before timing starts.
			conns := make([]*pgxpool.Conn, callers)
			for i := range conns {
				if conns[i], err = pool.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range conns {
				c.Release()
			}

			lats := make([][]time.Duration, callers)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := range callers {
				n := b.N / callers
				if g < b.N%callers {
					n++
				}
				lats[g] = make([]time.Duration, 0, n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						id := pgKeySeq.Add(1)
						key := fmt.Sprintf("intent-%d", id)
						execID := fmt.Sprintf("exec-%d", id)
						t0 := time.Now()
						if err := pgDecide(ctx, pool, key, execID, body); err != nil {
							b.Error(err)
							return
						}
						lats[g] = append(lats[g], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()

			var all []time.Duration
			for _, l := range lats {
				all = append(all, l...)
			}
			p50, p99 := pgPercentiles(all)
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(float64(p50)/float64(time.Millisecond), "p50-ms")
			b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
		})
	}
}

// pgDecide is one durable decision: claim the intent and append the
// accepted event in a single transaction.
func pgDecide(ctx context.Context, pool *pgxpool.Pool, key, execID string, body []byte) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	tag, err := tx.Exec(ctx, "INSERT INTO intents (key, execution_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, execID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		// A conflict would mean attach; every key here is new.
		return fmt.Errorf("intent %s already claimed", key)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO events (execution_id, body) VALUES ($1, $2)", execID, body); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgPercentiles returns the nearest-rank p50 and p99 of lat (sorted in place).
func pgPercentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	return rank(0.50), rank(0.99)
}
