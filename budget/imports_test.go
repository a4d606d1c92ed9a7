package budget

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The package is domain code: no NATS, Pebble, Connect or protobuf, no
// logger, no I/O packages (docs/design.md §6, "imports point inward").
func TestDomainImports(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"nats-io", "pebble", "connectrpc.com", "protobuf", "log", "log/slog", "os", "io/fs", "net", "net/http", "time/tzdata"}
	checked := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if p == bad || strings.HasPrefix(p, bad+"/") || (strings.Contains(bad, ".") || bad == "nats-io" || bad == "pebble" || bad == "protobuf") && strings.Contains(p, bad) {
					t.Errorf("%s imports %s", f.Name(), p)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
