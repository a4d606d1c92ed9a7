package natsauth

import (
	"os"
	"path/filepath"
	"testing"
)

// The credential files are made once, private, and kept: a second start
// finds the same keys, and a missing file is made without touching the rest.
func TestEnsureFiles(t *testing.T) {
	dir := t.TempDir()
	if err := EnsureFiles(dir); err != nil {
		t.Fatal(err)
	}
	first := map[Role]string{}
	for _, r := range Roles {
		fi, err := os.Stat(Path(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v", r, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(Path(dir, r))
		first[r] = string(b)
		if _, err := readSeed(Path(dir, r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(Path(dir, Finance)); err != nil {
		t.Fatal(err)
	}
	if err := EnsureFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, r := range Roles {
		b, _ := os.ReadFile(Path(dir, r))
		if (string(b) == first[r]) != (r != Finance) {
			t.Fatalf("%s: kept %v", r, string(b) == first[r])
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, Dir, ".tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	users, err := Users(dir, Streams{Budget: "B"})
	if err != nil || len(users) != len(Roles) {
		t.Fatalf("users: %v, %v", users, err)
	}
	if users[3].Permissions != nil || users[1].Permissions == nil {
		t.Fatal("admin must have every permission, finance only its own")
	}
}
