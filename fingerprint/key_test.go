package fingerprint

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(k1) != KeySize || bytes.Equal(k1, make([]byte, KeySize)) {
		t.Fatalf("created key has %d bytes or is zero", len(k1))
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %#o, want 0600", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !bytes.Equal(k1, k2) {
		t.Fatal("second call returned a different key")
	}
	// The file is the hex a second gateway of the same ledger is given.
	data, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	k3, err := ParseKey(string(data))
	if err != nil || !bytes.Equal(k3, k1) {
		t.Fatalf("ParseKey(file) = %v, want the same key", err)
	}
	if other, _ := LoadOrCreateKey(t.TempDir()); bytes.Equal(other, k1) {
		t.Fatal("two new ledgers got the same key")
	}
}

func TestLoadKeyFormats(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, KeySize)
	for name, content := range map[string][]byte{
		"raw":         raw,
		"hex":         []byte(hex.EncodeToString(raw)),
		"hex+LF":      []byte(hex.EncodeToString(raw) + "\n"),
		"HEX+CRLF":    []byte(strings.ToUpper(hex.EncodeToString(raw)) + "\r\n"),
		"raw \\n end": append(bytes.Repeat([]byte{0xab}, KeySize-1), '\n'),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, KeyFile), content, 0o600); err != nil {
				t.Fatal(err)
			}
			k, err := LoadOrCreateKey(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := raw
			if len(content) == KeySize {
				want = content
			}
			if !bytes.Equal(k, want) {
				t.Fatalf("key = %x, want %x", []byte(k), want)
			}
		})
	}
}

func TestLoadKeyRefuses(t *testing.T) {
	good := []byte(strings.Repeat("ab", KeySize))
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    string
	}{
		{"world readable", good, 0o644, "lets group or others access it"},
		{"group readable", good, 0o640, "want 0600"},
		{"too short", good[:40], 0o600, "40 bytes; want 32 raw bytes or 64 hex characters"},
		{"too long", append(good, "abab"...), 0o600, "68 bytes"},
		{"empty", nil, 0o600, "0 bytes"},
		{"not hex", []byte(strings.Repeat("zz", KeySize)), 0o600, "not hexadecimal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tt.mode != 0o600 {
				t.Skip("no Unix permissions")
			}
			dir := t.TempDir()
			name := filepath.Join(dir, KeyFile)
			if err := os.WriteFile(name, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(name, tt.mode); err != nil { // WriteFile's mode is masked by umask
				t.Fatal(err)
			}
			k, err := LoadOrCreateKey(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if k != nil {
				t.Error("a refused key file still returned a key")
			}
			if after, _ := os.ReadFile(name); !bytes.Equal(after, tt.content) {
				t.Error("a refused key file was changed")
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, KeyFile), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		if _, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Fatal("created a key in a directory that does not exist")
		}
		if _, err := LoadOrCreateKey(""); err == nil {
			t.Fatal("accepted an empty directory name")
		}
	})
}

func TestParseKey(t *testing.T) {
	hexKey := strings.Repeat("0f", KeySize)
	k, err := ParseKey("  " + hexKey + "\n")
	if err != nil || !bytes.Equal(k, bytes.Repeat([]byte{0x0f}, KeySize)) {
		t.Fatalf("ParseKey = %x, %v", []byte(k), err)
	}
	for _, s := range []string{"", hexKey[:62], hexKey + "00", strings.Repeat("g", 64)} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		} else if len(s) >= 8 && strings.Contains(err.Error(), s[:8]) {
			t.Errorf("ParseKey error repeats the input: %v", err)
		}
	}
}

func TestKeyIsNotPrinted(t *testing.T) {
	k := Key(bytes.Repeat([]byte{0xcd}, KeySize))
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %s %+v %#v %x", k, k, k, k, k)} {
		if strings.Contains(s, "cd") || strings.Contains(s, "205") {
			t.Errorf("key printed: %s", s)
		}
	}
}

// keyedDigest, cloning a prepared HMAC, is HMAC-SHA256 as crypto/hmac
// computes it from the key, for every message and from many goroutines.
func TestKeyedDigestIsHMAC(t *testing.T) {
	k := newMacKey([]byte("0123456789abcdef0123456789abcdef"))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				msg := bytes.Repeat([]byte{byte(g), byte(i)}, i)
				m := hmac.New(sha256.New, k.key)
				m.Write(msg)
				if want := digestPrefix + hex.EncodeToString(m.Sum(nil)); keyedDigest(k, msg) != want {
					t.Errorf("message %d: %s, want %s", i, keyedDigest(k, msg), want)
				}
			}
		}()
	}
	wg.Wait()
}
