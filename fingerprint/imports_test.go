package fingerprint

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The package is domain code: it must not import NATS, Pebble or Connect,
// nor a logger (docs/design.md §6, "imports point inward").
func TestDomainImports(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"nats-io", "pebble", "connectrpc.com", "log", "net/http"}
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
				if p == bad || strings.Contains(p, bad+"/") || (bad != "log" && strings.Contains(p, bad)) {
					t.Errorf("%s imports %s", f.Name(), p)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
