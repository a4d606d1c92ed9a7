package test

import (
	"os/exec"
	"strings"
	"testing"
)

// Domain packages hold the rules and do no I/O: they must not import
// NATS, Pebble, Connect, Prometheus or OpenTelemetry (docs/design.md §6).
// Adapters implement their ports; telemetry hangs on their hooks.
func TestDomainImportsNoAdapters(t *testing.T) {
	domain := []string{"contract", "fingerprint", "ledger", "projector", "budget", "budget/keeper", "executor", "config", "toolcall", "trust", "audit"}
	forbidden := []string{"github.com/nats-io/", "github.com/cockroachdb/pebble", "connectrpc.com/",
		"github.com/prometheus/", "go.opentelemetry.io/", "github.com/portcullis-dev/portcullis/telemetry"}
	for _, pkg := range domain {
		out, err := exec.Command("go", "list", "-deps", "github.com/portcullis-dev/portcullis/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("domain package %s depends on %s", pkg, dep)
				}
			}
		}
	}
}
