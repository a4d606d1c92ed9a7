package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nuid"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/server"
)

// The embedded server stages the execution streams' atomic batches on a
// tmpfs (server/staging.go): their batches directory is a link into
// /dev/shm, the budget stream's is not, decisions grouped into batches
// land, a staging directory removed under a running gateway is made again,
// a clean stop removes it, and a restart links it again. With
// --batch-staging disk nothing is linked.
func TestBatchesStagedInMemory(t *testing.T) {
	needTmpfs(t)
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
	streamDir := func(name string) string {
		return filepath.Join(dataDir, "jetstream", "jetstream", "$G", "streams", name)
	}
	link := filepath.Join(streamDir(ledger.ExecutionsStream), "batches")
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

	g := start("")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("the executions stream's batches directory is not a link: %v", err)
	}
	if !strings.HasPrefix(target, "/dev/shm/") {
		t.Fatalf("batches staged in %s, want a directory on /dev/shm", target)
	}
	if _, err := os.Readlink(filepath.Join(streamDir(keeper.Stream), "batches")); err == nil {
		t.Fatal("the budget stream's batches are staged in memory; its multi-message decisions must keep staging on disk")
	}
	load(g)
	batched(g)
	left, _ := os.ReadDir(target)
	for _, e := range left {
		if e.Name() != ".portcullis-link" {
			t.Fatalf("staged batch %s left in %s after every commit", e.Name(), target)
		}
	}

	// Something removes the staging directory (a cleaner of /dev/shm):
	// the gateway makes it again and batches keep landing.
	if err := os.RemoveAll(target); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(target); err == nil {
			break
		}
		if time.Now().After(deadline) {
			g.Close(context.Background())
			t.Fatalf("the staging directory %s was not made again within 5 s (heals every 200 ms)", target)
		}
	}
	load(g)

	g.Close(context.Background())
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a clean stop left the staging directory %s (err %v)", target, err)
	}

	// A restart links it again, and the ledger is whole.
	g = start(server.StagingMemory)
	if again, err := os.Readlink(link); err != nil || again != target {
		t.Fatalf("after a restart the batches directory links to %q (%v), want %q", again, err, target)
	}
	load(g)
	if last := streamLast(t, g, ledger.ExecutionsStream); last < uint64(next) {
		t.Fatalf("the executions stream holds %d events after %d Begins", last, next)
	}
	g.Close(context.Background())

	// --batch-staging disk: the server's own staging, batches still land.
	g = start(server.StagingDisk)
	defer g.Close(context.Background())
	if _, err := os.Readlink(link); err == nil {
		t.Fatal("--batch-staging disk left the batches directory a link into memory")
	}
	load(g)
	batched(g)
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

// needTmpfs skips a test of the batch staging where /dev/shm is not a
// writable tmpfs (the gateway then stages on disk).
func needTmpfs(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC || unix.Access("/dev/shm", unix.W_OK) != nil {
		t.Skip("/dev/shm is not a writable tmpfs on this machine")
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

// A gateway's start removes staging directories on the tmpfs whose link is
// gone (a gateway killed, its data dir deleted) once they are a minute old;
// a young one, one whose link still points at it, and a directory that is
// not a staging directory are kept.
func TestOrphanedStagingIsSwept(t *testing.T) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skip("no /dev/shm on this machine")
	}
	old := time.Now().Add(-2 * time.Minute)
	mk := func(link string, at time.Time) string {
		t.Helper()
		dir := filepath.Join("/dev/shm", "portcullis-batches-test"+nuid.Next())
		if err := os.MkdirAll(filepath.Join(dir, "staged"), 0o700); err != nil {
			t.Fatal(err)
		}
		if link != "" {
			if err := os.WriteFile(filepath.Join(dir, ".portcullis-link"), []byte(link), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	gone := filepath.Join(t.TempDir(), "deleted", "batches")
	orphan := mk(gone, old)
	young := mk(gone, time.Now())
	unmarked := mk("", old)
	live := mk(filepath.Join(t.TempDir(), "batches"), old)
	link, _ := os.ReadFile(filepath.Join(live, ".portcullis-link"))
	if err := os.Symlink(live, string(link)); err != nil {
		t.Fatal(err)
	}

	startGateway(t, "", nil)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("an orphaned staging directory a minute old was kept (%v)", err)
	}
	for name, dir := range map[string]string{"young": young, "unmarked": unmarked, "linked": live} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the %s staging directory was removed: %v", name, err)
		}
	}
}

// /dev/shm is writable by every local user and the staging directory's name
// is predictable: a directory made there by someone else (here: open to
// everyone) or a link put in its place is not staged into; the gateway
// stages on disk and its batches land.
func TestStagingRefusesForeignDirectory(t *testing.T) {
	needTmpfs(t)
	for name, plant := range map[string]func(t *testing.T, dir string){
		"open to everyone": func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"a link": func(t *testing.T, dir string) {
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			link := filepath.Join(dataDir, "jetstream", "jetstream", "$G", "streams", ledger.ExecutionsStream, "batches")
			sum := sha256.Sum256([]byte(link))
			dir := filepath.Join("/dev/shm", "portcullis-batches-"+hex.EncodeToString(sum[:8]))
			plant(t, dir)
			t.Cleanup(func() { os.RemoveAll(dir) })
			g, err := server.Start(context.Background(), server.Options{
				DataDir: dataDir, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsListen: "127.0.0.1:-1",
				FingerprintKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close(context.Background())
			if target, err := os.Readlink(link); err == nil {
				t.Fatalf("batches staged into %s, a directory this gateway did not make for itself", target)
			}
			if _, err := os.Stat(filepath.Join(dir, ".portcullis-link")); err == nil {
				t.Fatal("the gateway wrote into a staging directory it did not make for itself")
			}
			run := "run:" + nuid.Next()
			for i := range 20 {
				if _, err := g.Ledger.Begin(context.Background(), ledger.BeginInput{Action: benchAction(i, run)}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
