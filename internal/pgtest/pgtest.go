// Package pgtest starts a throwaway PostgreSQL 15 cluster for tests and
// benchmarks. The server runs with fsync=on and synchronous_commit=on, so a
// COMMIT returns only after its WAL is flushed to disk. No mocks.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/portcullis-dev/portcullis/internal/freeport"
)

// binDirs are searched in order for initdb and postgres.
var binDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/local/bin"}

func findBinDir() string {
	for _, d := range binDirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// ErrNotInstalled is returned by Run when the PostgreSQL 15 server binaries
// are not installed (Debian package postgresql-15).
var ErrNotInstalled = errors.New("postgres 15 not installed (apt-get install postgresql-15)")

// Server is a running throwaway cluster.
type Server struct {
	DSN  string // pgx DSN for superuser "bench"
	stop func()
}

// Stop shuts the server down (fast shutdown) and removes its directory.
func (s *Server) Stop() { s.stop() }

// Start initialises a cluster in a fresh temp dir, runs postgres on a free
// 127.0.0.1 port and returns a pgx DSN for superuser "bench". The server is
// stopped (fast shutdown) and the dir removed when tb ends. Skips tb if the
// Postgres 15 binaries are not installed.
func Start(tb testing.TB) (dsn string) {
	tb.Helper()
	s, err := Run()
	if errors.Is(err, ErrNotInstalled) {
		tb.Skip("postgres not installed")
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s.DSN
}

// Run is Start without a testing.TB: the caller stops the server.
func Run() (*Server, error) {
	bin := findBinDir()
	if bin == "" {
		return nil, ErrNotInstalled
	}

	// Postgres refuses to run as root: run it as the "postgres" OS user.
	var cred *syscall.Credential
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres OS user: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}

	// Not t.TempDir: its parents are 0700 root, which the postgres user
	// cannot enter.
	root, err := os.MkdirTemp(os.TempDir(), "pgtest-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(root) }
	fail := func(err error) (*Server, error) { cleanup(); return nil, err }
	if cred != nil {
		if err := checkTraversable(filepath.Dir(root)); err != nil {
			return fail(fmt.Errorf("pgtest: %w (set TMPDIR to a world-traversable dir)", err))
		}
	}
	dataDir := filepath.Join(root, "data")
	sockDir := filepath.Join(root, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := chownR(root, uid, gid); err != nil {
			return fail(err)
		}
	}

	// --no-sync only speeds up setup; the server itself runs with fsync=on.
	initdb := exec.Command(filepath.Join(bin, "initdb"),
		"-D", dataDir, "-A", "trust", "-U", "bench", "--no-sync",
		"-E", "UTF8", "--locale=C", "--no-instructions")
	initdb.Dir = root
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}

	ctx := context.Background()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freeport.Ports(1)
		if err != nil {
			return fail(err)
		}
		port := ports[0]
		logPath := filepath.Join(root, fmt.Sprintf("postgres-%d.log", attempt))
		logf, err := os.Create(logPath)
		if err != nil {
			return fail(err)
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"),
			"-D", dataDir,
			"-p", strconv.Itoa(port),
			"-k", sockDir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=on",
			"-c", "synchronous_commit=on",
			"-c", "max_connections=300",
		)
		cmd.Dir = root
		cmd.Stdout = logf
		cmd.Stderr = logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		err = cmd.Start()
		_ = logf.Close() // the child holds its own copy
		if err != nil {
			return fail(fmt.Errorf("start postgres: %w", err))
		}
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()

		dsn := fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres?sslmode=disable", port)
		if err := waitReady(ctx, dsn, exited, 60*time.Second); err != nil {
			stop(cmd, exited)
			out, _ := os.ReadFile(logPath)
			lastErr = fmt.Errorf("%v (exit: %v)\n%s", err, waitErr, out)
			continue
		}
		return &Server{DSN: dsn, stop: func() { stop(cmd, exited); cleanup() }}, nil
	}
	return fail(fmt.Errorf("postgres did not come up: %w", lastErr))
}

// waitReady polls until a pgx connection succeeds, the process exits, or
// the timeout passes.
func waitReady(ctx context.Context, dsn string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("postgres exited")
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var conn *pgx.Conn
		conn, err = pgx.Connect(cctx, dsn)
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("timeout after %v: %v", timeout, err)
}

// stop requests a fast shutdown (SIGINT) and kills the process if it has
// not exited within 30s.
func stop(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// checkTraversable reports an error unless every component of dir (an
// absolute path) is searchable by others.
func checkTraversable(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return errors.New(p + " is not traversable by the postgres user")
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func chownR(root string, uid, gid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
