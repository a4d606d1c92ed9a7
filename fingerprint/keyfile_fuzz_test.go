package fingerprint

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzKeyFile: a key file is whatever an operator (or an attacker with
// write access to the data dir) put there. Loading it never panics, a key
// loaded is KeySize bytes read from the file as written (raw or hex), and
// no error repeats the file's content (it may be most of a secret).
func FuzzKeyFile(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", KeySize) + "\n"))
	f.Add([]byte(strings.Repeat("AB", KeySize) + "\r\n"))
	f.Add(bytes.Repeat([]byte{0xff}, KeySize))
	f.Add([]byte(strings.Repeat("zz", KeySize)))
	f.Add([]byte(strings.Repeat("ab", KeySize) + "\n\n"))
	f.Add([]byte{})
	dir := f.TempDir() // one per worker process; inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, KeyFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadOrCreateKey(dir)
		if err != nil {
			if len(data) >= 8 && strings.Contains(err.Error(), string(data[:8])) && !strings.Contains(dir, string(data[:8])) {
				t.Fatalf("the error repeats the file: %v", err)
			}
			if k != nil {
				t.Fatal("a key with an error")
			}
			return
		}
		if len(k) != KeySize {
			t.Fatalf("a key of %d bytes", len(k))
		}
		if len(data) == KeySize {
			if !bytes.Equal(k, data) {
				t.Fatal("a raw key file was not read as written")
			}
			return
		}
		text := bytes.TrimRight(data, "\r\n")
		if got, err := hex.DecodeString(string(text)); err != nil || !bytes.Equal(got, k) {
			t.Fatalf("the key is not the file's hex (%v)", err)
		}
		if _, err := ParseKey(hex.EncodeToString(k)); err != nil {
			t.Fatalf("a loaded key does not parse back: %v", err)
		}
	})
}

// FuzzParseKey: keys given by flag or environment. Errors never repeat the
// input; a key parsed is KeySize bytes.
func FuzzParseKey(f *testing.F) {
	f.Add(strings.Repeat("0f", KeySize))
	f.Add(" " + strings.Repeat("0f", KeySize) + "\n")
	f.Add(strings.Repeat("g0", KeySize))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if len(strings.TrimSpace(s)) >= 8 && strings.Contains(err.Error(), strings.TrimSpace(s)) {
				t.Fatalf("the error repeats the key: %v", err)
			}
			return
		}
		if len(k) != KeySize {
			t.Fatalf("%d bytes", len(k))
		}
	})
}
