package trust

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/proto"
)

func TestEnrollmentCountsOnlyWithTheRootsSignature(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, rogue, _ := ed25519.GenerateKey(nil)
	_, gw, _ := ed25519.GenerateKey(nil)
	kr := NewKeyring(root.Public().(ed25519.PublicKey), nil)

	honest := EnrollSelf(root, gw, "gw-1", "http://10.0.0.5:8080", time.Now())
	if _, err := kr.Add(honest); err != nil {
		t.Fatal(err)
	}
	if ks := keys(t, kr, "gw-1"); len(ks) != 1 || !bytes.Equal(ks[0], gw.Public().(ed25519.PublicKey)) {
		t.Fatalf("enrolled keys: %x", ks)
	}
	cases := map[string]*pb.SignedRecord{
		"signed by another root": EnrollSelf(rogue, rogue, "gw-evil", "", time.Now()),
		"record edited":          {Record: append(bytes.Clone(honest.GetRecord()), 0x2a, 0x01, 'x'), Signature: honest.GetSignature()},
		"root record replayed":   NewRoot(root, time.Now()), // the root's signature over another kind of record
		"empty":                  {},
	}
	for name, sr := range cases {
		if _, err := kr.Add(sr); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if kr.Rejected() != uint64(len(cases)) || len(keys(t, kr, "gw-evil")) != 0 {
		t.Fatalf("rejected %d, gw-evil keys %d", kr.Rejected(), len(keys(t, kr, "gw-evil")))
	}
}

func TestLookupFindsAGatewayEnrolledLater(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, gw, _ := ed25519.GenerateKey(nil)
	stored := []StoredRecord{{Seq: 7, Data: marshal(t, EnrollSelf(root, gw, "gw-2", "", time.Now()))}}
	kr := NewKeyring(root.Public().(ed25519.PublicKey), func(_ context.Context, id string, after uint64, limit int) ([]StoredRecord, error) {
		if id == "gw-2" && after < 7 {
			return stored, nil
		}
		return nil, nil
	})
	if len(keys(t, kr, "gw-2")) != 1 || len(keys(t, kr, "gw-3")) != 0 {
		t.Fatal("lookup of a later enrollment")
	}
	failing := NewKeyring(root.Public().(ed25519.PublicKey), func(context.Context, string, uint64, int) ([]StoredRecord, error) {
		return nil, errors.New("meta stream unreachable")
	})
	if _, err := failing.GatewayKeys("gw-2"); err == nil {
		t.Fatal("a failed lookup must be an error, not 'not enrolled'")
	}
}

// Junk under a gateway id costs one read per record, once: a later look-up
// reads only what was stored since (the negative answer is cached by
// sequence, so an enrollment stored later is still found), and an id
// whose first EnrollRecordsMax records are junk is "not enrolled" without
// any read, however much more is stored.
func TestLookupReadsEachRecordOnceAndBounded(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, gw, _ := ed25519.GenerateKey(nil)
	var stored []StoredRecord
	for i := range 10 {
		stored = append(stored, StoredRecord{Seq: uint64(i + 1), Data: []byte("junk")})
	}
	reads := 0
	kr := NewKeyring(root.Public().(ed25519.PublicKey), func(_ context.Context, id string, after uint64, limit int) ([]StoredRecord, error) {
		var out []StoredRecord
		for _, r := range stored {
			if r.Seq > after && len(out) < limit {
				out = append(out, r)
			}
		}
		reads += len(out)
		return out, nil
	})
	for range 3 {
		if len(keys(t, kr, "gw-2")) != 0 {
			t.Fatal("junk enrolled a key")
		}
	}
	if reads != 10 {
		t.Fatalf("three look-ups over 10 junk records read %d records, want each once", reads)
	}
	stored = append(stored, StoredRecord{Seq: 11, Data: marshal(t, EnrollSelf(root, gw, "gw-2", "", time.Now()))})
	if len(keys(t, kr, "gw-2")) != 1 || reads != 11 {
		t.Fatalf("an enrollment stored after a negative answer: read %d", reads)
	}

	stored, reads = nil, 0
	for i := range EnrollRecordsMax {
		stored = append(stored, StoredRecord{Seq: uint64(i + 1), Data: []byte("junk")})
	}
	stored = append(stored, StoredRecord{Seq: EnrollRecordsMax + 1, Data: marshal(t, EnrollSelf(root, gw, "gw-3", "", time.Now()))})
	for range 3 {
		if len(keys(t, kr, "gw-3")) != 0 {
			t.Fatal("an enrollment after the first EnrollRecordsMax records of its id counted")
		}
	}
	if reads != EnrollRecordsMax {
		t.Fatalf("read %d records of an id, want at most %d in all", reads, EnrollRecordsMax)
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keys(t *testing.T, kr *Keyring, id string) []ed25519.PublicKey {
	t.Helper()
	ks, err := kr.GatewayKeys(id)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestRootRecordIsSelfSigned(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	sr := NewRoot(root, time.Now())
	r, err := OpenRoot(sr)
	if err != nil || !bytes.Equal(r.GetPublicKey(), root.Public().(ed25519.PublicKey)) {
		t.Fatal(err)
	}
	sr.Signature[0] ^= 1
	if _, err := OpenRoot(sr); !errors.Is(err, ErrBadRecord) {
		t.Fatal("a root record with a bad signature opened")
	}
}

func TestSealedKeyOpensOnlyForItsRecipient(t *testing.T) {
	_, gw, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	secret := bytes.Repeat([]byte{7}, 32)
	pub, _ := BoxKeys(gw)
	sk, err := SealKey(secret, pub[:])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sk.GetSealed(), secret) {
		t.Fatal("sealed box holds the secret in the clear")
	}
	got, err := OpenKey(sk, gw)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %v", err)
	}
	if _, err := OpenKey(sk, other); !errors.Is(err, ErrBadRecord) {
		t.Fatal("another key opened the sealed key")
	}
}

func TestKeyFilesAndReferences(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "root.key")
	key, created, err := LoadOrCreateKey(p)
	if err != nil || !created {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode())
	}
	again, created, err := LoadOrCreateKey(p)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatal("reload of the key file")
	}
	t.Setenv("PORTCULLIS_TEST_KEY", hex.EncodeToString(key.Seed()))
	for _, ref := range []string{p, "file:" + p, "env:PORTCULLIS_TEST_KEY"} {
		k, err := LoadKey(ref)
		if err != nil || !bytes.Equal(k, key) {
			t.Errorf("%s: %v", ref, err)
		}
	}
	for _, ref := range []string{"env:PORTCULLIS_NO_SUCH_KEY", filepath.Join(dir, "missing")} {
		if _, err := LoadKey(ref); !errors.Is(err, ErrNoKey) {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if err := WriteKeyFile(p, key); err == nil {
		t.Fatal("a key file was overwritten")
	}
}
