package server

// Atomic batches of the execution streams staged in memory.
//
// The embedded nats-server stages every atomic batch of a one-replica file
// stream in a file store of its own (<stream dir>/batches/<batch>) before
// it commits the batch: a directory, a metadata file written with O_SYNC,
// the staged messages synced, then everything unlinked. On this kind of
// disk that is about four fsyncs per batch, so a group commit of a few
// decisions cost more than sending them as plain publishes, and one
// stream took little more than its serial fsync rate (docs/performance.md,
// "Batches staged in memory"). The staging exists so that a commit cut by a
// crash can be finished at the next start; a replicated stream stages in
// memory.
//
// Here the batches directory of each execution stream is a symbolic link to
// a directory on a tmpfs (/dev/shm). The commit itself is unchanged: the
// batch's messages are written to the stream and fsynced once before the
// server acknowledges it, so an acknowledged decision is as durable as
// before. What changes is the repair of a commit cut short: after a
// process crash the tmpfs still holds the staged batch and the server
// finishes it as before; after a power loss or an OS crash it does not,
// and the stream may keep a prefix of a batch nobody was told of. An
// execution stream's batches are groups of independent one-message
// decisions (the ledger never appends several messages at once there), so
// such a prefix is a set of appends whose acknowledgement was lost, which
// the recovery table already handles (ErrAppendUnknown). The budget and
// sessions streams append multi-message decisions that must land whole;
// they keep staging on disk.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Batch staging modes (Options.BatchStaging, --batch-staging).
const (
	// StagingMemory stages the execution streams' atomic batches on a
	// tmpfs, where the embedded server runs and one is found (the default).
	StagingMemory = "memory"
	// StagingDisk leaves the staging where nats-server puts it.
	StagingDisk = "disk"
)

// stagingRoot is the tmpfs the staging directories are made in.
const stagingRoot = "/dev/shm"

// stagingMarker, in each staging directory, names the link that points at
// it, so a later start can remove directories whose link is gone (a gateway
// killed, its data dir deleted). nats-server reads only the batch
// directories it names, never this file.
const stagingMarker = ".portcullis-link"

// stagingSweepAge is how old an orphaned staging directory must be before
// it is removed: a gateway starting at the same time may not have made its
// link yet.
const stagingSweepAge = time.Minute

// stagingHealEvery is how often the staging directories are checked and
// made again if something removed them (systemd's RemoveIPC, a cleaner of
// /dev/shm): a batch staged meanwhile fails as incomplete, which the
// committer retries for longer than this.
const stagingHealEvery = 200 * time.Millisecond

// staging is the set of tmpfs directories the embedded server stages
// batches in, by the link that points at each.
type staging struct {
	mu    sync.Mutex
	dirs  map[string]string // link (<stream dir>/batches) -> tmpfs directory
	quit  chan struct{}
	done  chan struct{}
	start sync.Once
	sweep sync.Once // orphans removed once a start
}

// checkStaging refuses an unknown --batch-staging.
func checkStaging(mode string) error {
	switch mode {
	case "", StagingMemory, StagingDisk:
		return nil
	}
	return fmt.Errorf("--batch-staging %q: want %q or %q", mode, StagingMemory, StagingDisk)
}

// stageInMemory points the embedded server's batch staging of stream at a
// tmpfs directory. It stages nothing (the server stages on disk) where there
// is no embedded server, no tmpfs, or the stream's batches directory already
// exists as a real directory (a batch may be staged there right now).
func (n *natsConn) stageInMemory(stream string, lg *slog.Logger) error {
	if n.server == nil {
		return nil
	}
	cfg := n.server.JetStreamConfig()
	acc := n.server.GlobalAccount()
	if cfg == nil || acc == nil {
		return nil
	}
	if !isTmpfs(stagingRoot) {
		lg.Debug("atomic batches staged on disk: no tmpfs", "dir", stagingRoot)
		return nil
	}
	streamDir := filepath.Join(cfg.StoreDir, acc.GetName(), "streams", stream)
	if _, err := os.Stat(streamDir); err != nil {
		return fmt.Errorf("stage %s in memory: %w", stream, err)
	}
	link := filepath.Join(streamDir, "batches")
	sum := sha256.Sum256([]byte(link))
	dir := filepath.Join(stagingRoot, stagingPrefix+hex.EncodeToString(sum[:8]))
	n.stage.sweep.Do(func() { sweepOrphans(lg) })
	if err := makeStagingDir(dir, link); err != nil {
		lg.Warn("atomic batches staged on disk: no staging directory of ours on the tmpfs", "stream", stream, "err", err)
		return nil
	}
	switch target, err := os.Readlink(link); {
	case err == nil && target == dir:
		// Linked already (the server removes the link at its start, so
		// by this process: the stream staged twice).
	case err == nil:
		return fmt.Errorf("stage %s in memory: %s points at %s, not %s", stream, link, target, dir)
	case errors.Is(err, os.ErrNotExist):
		if err := os.Symlink(dir, link); err != nil {
			return fmt.Errorf("stage %s in memory: %w", stream, err)
		}
	default:
		// A real directory: the server made it, and may be staging a
		// batch in it. Left alone; the next start links it. Nothing can
		// reach a batch staged in dir any more.
		_ = os.RemoveAll(dir)
		lg.Info("atomic batches staged on disk until the next start", "stream", stream, "dir", link)
		return nil
	}
	n.stage.mu.Lock()
	if n.stage.dirs == nil {
		n.stage.dirs = map[string]string{}
	}
	n.stage.dirs[link] = dir
	n.stage.mu.Unlock()
	n.stage.start.Do(func() {
		n.stage.quit, n.stage.done = make(chan struct{}), make(chan struct{})
		go n.stage.heal()
	})
	return nil
}

// StageInMemory stages the atomic batches of stream, one the gateway's
// embedded server holds but the ledger does not own (the benchmarks' raw
// ceiling), as the gateway stages its execution streams' (see above); not
// with --batch-staging disk, an outside NATS, or no tmpfs, where the
// server stages on disk.
func (g *Gateway) StageInMemory(stream string) error {
	if g.staging == StagingDisk {
		return nil
	}
	return g.nats.stageInMemory(stream, g.log)
}

// heal makes the staging directories again if they were removed.
func (s *staging) heal() {
	defer close(s.done)
	t := time.NewTicker(stagingHealEvery)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for link, dir := range s.dirs {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				_ = makeStagingDir(dir, link)
			}
		}
		s.mu.Unlock()
	}
}

// stop ends the healing and, once the server is down, removes the staging
// directories (a clean stop leaves no batch staged). The links stay behind
// dangling; the server removes them at its next start.
func (s *staging) stop() {
	if s.quit == nil {
		return
	}
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, dir := range s.dirs {
		_ = os.RemoveAll(dir)
	}
}

// stagingPrefix starts the name of every staging directory.
const stagingPrefix = "portcullis-batches-"

// makeStagingDir makes dir (if missing) with its marker naming link.
// /dev/shm is writable by every local user and the name is predictable, so
// a directory someone else made (or a link of theirs) is refused: staged
// batches go only into a directory of this user's that nobody else may
// write.
func makeStagingDir(dir, link string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is not a directory of this user's that only it may use (mode %o, owner %d)", dir, st.Mode, st.Uid)
	}
	return os.WriteFile(filepath.Join(dir, stagingMarker), []byte(link), 0o600)
}

// sweepOrphans removes the staging directories on the tmpfs that no link
// points at any more and that are older than stagingSweepAge: nobody can
// finish a batch staged there.
func sweepOrphans(lg *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(stagingRoot, stagingPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < stagingSweepAge {
			continue
		}
		link, err := os.ReadFile(filepath.Join(dir, stagingMarker))
		if err != nil {
			continue // not ours, or still being made
		}
		if target, err := os.Readlink(string(link)); err == nil && target == dir {
			continue
		}
		if err := os.RemoveAll(dir); err == nil {
			lg.Debug("removed an orphaned batch staging directory", "dir", dir, "link", string(link))
		}
	}
}

// isTmpfs reports whether dir is a writable directory on a tmpfs.
func isTmpfs(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC && unix.Access(dir, unix.W_OK) == nil
}
