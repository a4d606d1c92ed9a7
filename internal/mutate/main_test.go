package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const sample = `# guarantee: g
# tests: ./x -run '^(TestA|TestB)$'
@@ a/b.go
<<<<
	old line
====
	new line
>>>>
`

func TestParse(t *testing.T) {
	c, err := Parse("n", sample)
	if err != nil {
		t.Fatal(err)
	}
	want := Canary{Name: "n", Guarantee: "g", Tests: []string{"./x", "-run", "^(TestA|TestB)$"},
		Edits: []Edit{{File: "a/b.go", Old: "\told line\n", New: "\tnew line\n"}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Parse = %+v\nwant    %+v", c, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"no guarantee":   strings.Replace(sample, "# guarantee: g\n", "", 1),
		"no tests":       strings.Replace(sample, "# tests: ./x -run '^(TestA|TestB)$'\n", "", 1),
		"no edit":        "# guarantee: g\n# tests: ./x\n",
		"unclosed block": strings.Replace(sample, ">>>>\n", "", 1),
		"no separator":   strings.Replace(sample, "====\n", "", 1),
		"stray line":     sample + "oops\n",
		"unclosed quote": strings.Replace(sample, "'^(TestA|TestB)$'", "'^TestA", 1),
	} {
		if _, err := Parse("n", text); err == nil {
			t.Errorf("%s: Parse accepted it", name)
		}
	}
}

func TestApplyNeedsExactlyOneMatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.go"), []byte("a\nb\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := apply(dir, Canary{Edits: []Edit{{File: "f.go", Old: "a\n", New: "c\n"}}}); err == nil {
		t.Fatal("apply replaced a text that occurs twice")
	}
	if err := apply(dir, Canary{Edits: []Edit{{File: "f.go", Old: "b\n", New: "c\n"}}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "f.go"))
	if string(b) != "a\nc\na\n" {
		t.Fatalf("file after apply: %q", b)
	}
}

// The canaries in the repository all parse.
func TestRepositoryCanariesParse(t *testing.T) {
	if _, err := load("../../mutations", nil); err != nil {
		t.Fatal(err)
	}
}

func TestEditedDirs(t *testing.T) {
	c := Canary{Edits: []Edit{{File: "auth/policy.go"}, {File: "gateway/caller.go"}, {File: "auth/token.go"}}}
	if got := editedDirs(c); !reflect.DeepEqual(got, []string{"auth", "gateway"}) {
		t.Fatal(got)
	}
}
