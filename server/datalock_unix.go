//go:build unix

package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// dataLockFile is the file in a data directory whose lock marks the
// embedded JetStream server running on it.
const dataLockFile = "jetstream.lock"

// lockDataDir takes the data directory's lock (an exclusive flock on
// DIR/jetstream.lock, released by the kernel when the process dies, so a
// SIGKILLed gateway leaves no stale lock). busy: another process (or
// another open in this one) runs the embedded server on dir.
func lockDataDir(dir string) (release func(), busy bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(dir, dataLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, err
	}
	return func() { _ = f.Close() }, false, nil
}
