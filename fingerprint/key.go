package fingerprint

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Key is the per-ledger HMAC secret (KeySize bytes). Every gateway of one
// ledger uses the same key, or their fingerprints would not match. Its
// String method hides the value so that it is not logged by accident.
type Key []byte

// KeySize is the length of a Key in bytes.
const KeySize = 32

// KeyFile is the name of the key file LoadOrCreateKey keeps in its directory.
const KeyFile = "fingerprint.key"

// String returns a placeholder, never the key.
func (k Key) String() string { return "fingerprint.Key(redacted)" }

// GoString returns a placeholder, never the key.
func (k Key) GoString() string { return k.String() }

// ParseKey parses a key given by flag or environment: 64 hex characters
// (surrounding white space is ignored). Errors never repeat the input.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if len(s) != 2*KeySize {
		return nil, fmt.Errorf("fingerprint key: want %d hex characters, got %d", 2*KeySize, len(s))
	}
	k, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("fingerprint key: not hexadecimal")
	}
	return Key(k), nil
}

// LoadOrCreateKey reads dir/fingerprint.key, or creates it when absent.
//
// The file holds the key as 32 raw bytes or as 64 hex characters (an
// optional trailing newline allowed). A new file is written as hex plus a
// newline, so it can be copied into another gateway's flag; it is created
// with O_EXCL and mode 0600 from crypto/rand. A file that group or others
// may access, that is not a regular file, or that has the wrong size is
// refused: the key is what keeps fingerprints and secret digests from being
// recomputed by anyone who reads the ledger.
func LoadOrCreateKey(dir string) (Key, error) {
	if dir == "" {
		return nil, errors.New("fingerprint key: no directory given")
	}
	name := filepath.Join(dir, KeyFile)
	k, err := readKeyFile(name)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	k, err = createKeyFile(name)
	if errors.Is(err, fs.ErrExist) { // another process created it first
		return readKeyFile(name)
	}
	return k, err
}

func readKeyFile(name string) (Key, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("fingerprint key %s: not a regular file", name)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("fingerprint key %s: mode %#o lets group or others access it; want 0600 (chmod 600 %s)", name, perm, name)
	}
	const maxFile = 2*KeySize + 2 // hex plus "\r\n"
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("fingerprint key %s: %w", name, err)
	}
	if len(data) == KeySize {
		return Key(data), nil
	}
	text := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	if len(text) != 2*KeySize {
		return nil, fmt.Errorf("fingerprint key %s: %d bytes; want %d raw bytes or %d hex characters", name, st.Size(), KeySize, 2*KeySize)
	}
	k := make(Key, KeySize)
	if _, err := hex.Decode(k, text); err != nil {
		return nil, fmt.Errorf("fingerprint key %s: %d bytes but not hexadecimal", name, st.Size())
	}
	return k, nil
}

func createKeyFile(name string) (Key, error) {
	k := make(Key, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: create: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(k) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name) // a partial key file would be refused at next start
		return nil, fmt.Errorf("fingerprint key: write %s: %w", name, err)
	}
	if err := syncDir(filepath.Dir(name)); err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	return k, nil
}

// syncDir makes the new directory entry durable, so a crash cannot lose a
// key that fingerprints were already computed with.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
