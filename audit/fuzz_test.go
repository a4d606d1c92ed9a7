package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExportLines: an export's stream files come from outside (an
// auditor's copy). Whatever the lines say, ReadExport never panics, counts
// at most one event per line, and a file with an unreadable line never
// verifies.
func FuzzExportLines(f *testing.F) {
	f.Add([]byte(`{"stream":"executions","seq":1,"subject":"pc.exec.f1.act_1","data":"CgNldnQ="}` + "\n"))
	f.Add([]byte("not json\n"))
	f.Add([]byte(`{"seq":18446744073709551615,"data":null}` + "\n" + `{"seq":1}` + "\n"))
	f.Add([]byte(`{"seq":1,"data":"////"}`))
	dir := f.TempDir() // one per worker process; inputs run one at a time
	f.Fuzz(func(t *testing.T, lines []byte) {
		man := Manifest{Streams: map[string]StreamExport{"executions": {File: "executions.jsonl", Events: 1, LastSeq: 1}}, Gateways: map[string][]string{}}
		writeExport(t, dir, man, lines)
		rep, err := ReadExport(dir, VerifyOptions{})
		if err != nil {
			return // a line beyond the scanner's buffer
		}
		n := bytes.Count(lines, []byte("\n"))
		if len(lines) > 0 && lines[len(lines)-1] != '\n' {
			n++
		}
		if rep.Events > n {
			t.Fatalf("%d events from %d lines", rep.Events, n)
		}
		for _, l := range bytes.Split(lines, []byte("\n")) {
			var x Line
			if len(bytes.TrimSpace(l)) > 0 && json.Unmarshal(l, &x) != nil && rep.OK {
				t.Fatalf("an unreadable line %q verified", l)
			}
		}
	})
}

// FuzzExportManifest: the manifest comes from outside too. It never
// panics ReadExport, and a partial export (a filter) is never verified.
func FuzzExportManifest(f *testing.F) {
	f.Add([]byte(`{"streams":{"executions":{"file":"executions.jsonl","events":0,"last_seq":0}},"gateways":{}}`))
	f.Add([]byte(`{"filter":"pc.exec.>","streams":{}}`))
	f.Add([]byte(`{"streams":{"a":{"file":"executions.jsonl","checkpoints":true}},"gateways":{"gw":"00"}}`))
	f.Add([]byte(`{"streams":null,"gateways":{"gw":"` + string(bytes.Repeat([]byte("ab"), 32)) + `"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, manifest []byte) {
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "executions.jsonl"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := ReadExport(dir, VerifyOptions{})
		var m Manifest
		if json.Unmarshal(manifest, &m) == nil && m.Filter != "" && (err == nil || rep.OK) {
			t.Fatalf("a partial export was verified: %s", manifest)
		}
	})
}

func writeExport(t *testing.T, dir string, man Manifest, lines []byte) {
	t.Helper()
	b, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "executions.jsonl"), lines, 0o600); err != nil {
		t.Fatal(err)
	}
}
