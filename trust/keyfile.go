package trust

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// maxKeyFileBytes bounds a key file or variable read.
const maxKeyFileBytes = 4 << 10

// ErrNoKey: a key reference names nothing (no such file or variable).
var ErrNoKey = errors.New("no key")

// LoadKey reads an Ed25519 private key (a 32-byte seed in hex) from a
// reference: "env:NAME" (the variable holds the hex seed), "file:PATH" or
// a bare path.
func LoadKey(ref string) (ed25519.PrivateKey, error) {
	var text string
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := strings.TrimPrefix(ref, "env:")
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: environment variable %s is not set", ErrNoKey, name)
		}
		text = v
	default:
		p := strings.TrimPrefix(ref, "file:")
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist", ErrNoKey, p)
		}
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", p, err)
		}
		if len(b) > maxKeyFileBytes {
			return nil, fmt.Errorf("key %s: larger than %d bytes", p, maxKeyFileBytes)
		}
		text = string(b)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key %s: not a 32-byte hex seed", ref)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// CreateKeyFile makes a new Ed25519 key and writes its seed to path: mode
// 0600, created exclusively, the file and its directory fsynced before it
// is used.
func CreateKeyFile(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := WriteKeyFile(path, priv); err != nil {
		return nil, err
	}
	return priv, nil
}

// WriteKeyFile writes priv's seed to a new file at path (0600, fsynced).
func WriteKeyFile(path string, priv ed25519.PrivateKey) error {
	return writeSecretFile(path, []byte(hex.EncodeToString(priv.Seed())+"\n"))
}

func writeSecretFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	_, werr := f.Write(data)
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("key file %s: %w", path, werr)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// LoadOrCreateKey loads the key at path, or creates it there when the file
// does not exist. created reports which.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if errors.Is(err, ErrNoKey) {
		key, err = CreateKeyFile(path)
		return key, err == nil, err
	}
	return key, false, err
}

// BoxKeys derives the X25519 key pair an Ed25519 key receives sealed
// secrets with: the private scalar is SHA-256 over a domain label and the
// seed, so nothing else needs storing.
func BoxKeys(priv ed25519.PrivateKey) (pub, secret *[32]byte) {
	sum := sha256.Sum256(append([]byte("portcullis box key v1\x00"), priv.Seed()...))
	secret = &sum
	p, err := curve25519.X25519(secret[:], curve25519.Basepoint)
	if err != nil {
		panic(fmt.Sprintf("x25519: %v", err)) // only for a low-order point, never the base point
	}
	pub = new([32]byte)
	copy(pub[:], p)
	return pub, secret
}

// ParsePublicKey reads a hex Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: not 32 bytes of hex", s)
	}
	return ed25519.PublicKey(b), nil
}
