package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A manifest names the files of its streams, and it comes from outside:
// a name that leaves the export directory is refused, never opened.
func TestReadExportStaysInItsDirectory(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside.jsonl")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "export")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../outside.jsonl", outside, "a/../../outside.jsonl"} {
		writeExport(t, dir, Manifest{Streams: map[string]StreamExport{"executions": {File: name}}}, nil)
		_, err := ReadExport(dir, VerifyOptions{})
		if err == nil || !strings.Contains(err.Error(), "export stream executions") {
			t.Errorf("manifest file %q: err %v, want a refusal naming the stream", name, err)
		}
	}
	// A name inside gets past this check (and then fails only for want of
	// a ledger root in this bare manifest).
	writeExport(t, dir, Manifest{Streams: map[string]StreamExport{"executions": {File: "executions.jsonl"}}}, nil)
	if _, err := ReadExport(dir, VerifyOptions{}); err == nil || strings.Contains(err.Error(), "export stream") {
		t.Fatalf("an export whose file is inside its directory: %v", err)
	}
}
