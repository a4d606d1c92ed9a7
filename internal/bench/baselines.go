package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/pgtest"
)

// pgSchema is what a user would build instead of the ledger: an
// idempotency table keyed by intent plus an append-only event table.
const pgSchema = `
CREATE TABLE IF NOT EXISTS intents (key text PRIMARY KEY, execution_id text NOT NULL);
CREATE TABLE IF NOT EXISTS events (seq bigserial PRIMARY KEY, execution_id text NOT NULL, body bytea NOT NULL);
`

// postgresAttach: the attach case of the table: the intent is already
// claimed (one of 1 024, each caller cycling through its own), so the
// transaction's INSERT ... ON CONFLICT DO NOTHING claims nothing, reads the
// execution it belongs to and appends an attach event.
func postgresAttach(pg *pgtest.Server) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		op, done, err := postgresTable(pg)(ctx, callers)
		if err != nil {
			return nil, nil, err
		}
		err = parallel(ctx, min(callers, 16), attachIntents, func(ctx context.Context, i int) error { return op(ctx, 0, i) })
		done() // its connections count against max_connections
		if err != nil {
			return nil, nil, err
		}
		cfg, err := pgxpool.ParseConfig(pg.DSN)
		if err != nil {
			return nil, nil, err
		}
		cfg.MaxConns, cfg.MinConns = int32(callers), int32(callers)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		per := max(1, attachIntents/callers)
		body := make([]byte, benchkit.RawPayload)
		return func(ctx context.Context, c, i int) error {
			key := "intent-" + strconv.Itoa((c*per+i%per)%attachIntents)
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
			tag, err := tx.Exec(ctx, "INSERT INTO intents (key, execution_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, "exec-new")
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 0 {
				return fmt.Errorf("intent %s was not claimed", key)
			}
			var exec string
			if err := tx.QueryRow(ctx, "SELECT execution_id FROM intents WHERE key = $1", key).Scan(&exec); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO events (execution_id, body) VALUES ($1, $2)", exec, body); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, pool.Close, nil
	}
}

// postgresTable: one decision = one transaction that claims a new intent
// (INSERT ... ON CONFLICT DO NOTHING) and appends its 300-byte event, on
// Postgres 15 with fsync=on and synchronous_commit=on.
func postgresTable(pg *pgtest.Server) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		cfg, err := pgxpool.ParseConfig(pg.DSN)
		if err != nil {
			return nil, nil, err
		}
		cfg.MaxConns, cfg.MinConns = int32(callers), int32(callers)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		if _, err := pool.Exec(ctx, pgSchema+"TRUNCATE intents, events RESTART IDENTITY;"); err != nil {
			pool.Close()
			return nil, nil, err
		}
		var fsync, sc string
		if err := pool.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sc); err != nil || fsync != "on" || sc != "on" {
			pool.Close()
			return nil, nil, fmt.Errorf("postgres fsync=%s synchronous_commit=%s (%v), want on/on", fsync, sc, err)
		}
		conns := make([]*pgxpool.Conn, callers)
		for i := range conns {
			if conns[i], err = pool.Acquire(ctx); err != nil {
				pool.Close()
				return nil, nil, err
			}
		}
		for _, c := range conns {
			c.Release()
		}
		body := make([]byte, benchkit.RawPayload)
		return func(ctx context.Context, _, i int) error {
			key, exec := "intent-"+strconv.Itoa(i), "exec-"+strconv.Itoa(i)
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
			tag, err := tx.Exec(ctx, "INSERT INTO intents (key, execution_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, exec)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("intent %s already claimed", key)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO events (execution_id, body) VALUES ($1, $2)", exec, body); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, pool.Close, nil
	}
}

// redisServer is a throwaway redis-server on 127.0.0.1 with no persistence
// (no RDB, no AOF): the non-durable reference.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "pcbench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--maxclients", "1024", "--protected-mode", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the suite
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dialRedis(r.addr)
		if err == nil {
			err = c.do("PING")
			c.close()
			if err == nil {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("redis did not come up: %w", err)
		}
		select {
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = os.RemoveAll(r.dir)
}

// redisConn is a minimal RESP client: one command, one reply.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

func (c *redisConn) close() { _ = c.c.Close() }

// do sends a command and wants +OK or +PONG.
func (c *redisConn) do(args ...string) error {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+OK\r\n" && line != "+PONG\r\n" {
		return fmt.Errorf("redis: %q", strings.TrimSpace(line))
	}
	return nil
}

// redisSetNX: one decision = SET key <300 bytes> NX on a new key, one
// connection per caller.
func redisSetNX(r *redisServer) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		conns := make([]*redisConn, callers)
		closeAll := func() {
			for _, c := range conns {
				if c != nil {
					c.close()
				}
			}
		}
		for i := range conns {
			c, err := dialRedis(r.addr)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns[i] = c
		}
		if err := conns[0].do("FLUSHALL"); err != nil {
			closeAll()
			return nil, nil, err
		}
		val := strings.Repeat("x", benchkit.RawPayload)
		return func(_ context.Context, c, i int) error {
			return conns[c].do("SET", "intent-"+strconv.Itoa(i), val, "NX")
		}, closeAll, nil
	}
}
