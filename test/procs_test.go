package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestShardedGatewayRaisesProcs: a gateway whose embedded server holds
// several execution shards runs twice the Go processors the runtime
// chose (each shard's loop blocks one in fsync), unless GOMAXPROCS is set;
// a one-shard gateway keeps the runtime's count. Each case runs in a
// process of its own (a second sharded gateway in a process does not
// raise it again).
func TestShardedGatewayRaisesProcs(t *testing.T) {
	if shards := os.Getenv("PC_PROCS_CHILD"); shards != "" {
		n, _ := strconv.Atoi(shards)
		before := runtime.GOMAXPROCS(0)
		shardedGateway(t, t.TempDir(), n)
		shardedGateway(t, t.TempDir(), n)
		fmt.Printf("procs %d %d\n", before, runtime.GOMAXPROCS(0))
		return
	}
	for _, c := range []struct {
		shards int
		env    string // GOMAXPROCS, "" = unset
		factor int
	}{
		{4, "", 2},
		{1, "", 1},
		{4, "3", 1},
	} {
		t.Run(fmt.Sprintf("shards=%d,GOMAXPROCS=%q", c.shards, c.env), func(t *testing.T) {
			cmd := exec.CommandContext(context.Background(), os.Args[0], "-test.run=^TestShardedGatewayRaisesProcs$", "-test.count=1")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOMAXPROCS=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "PC_PROCS_CHILD="+strconv.Itoa(c.shards))
			if c.env != "" {
				cmd.Env = append(cmd.Env, "GOMAXPROCS="+c.env)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var before, after int
			i := strings.Index(string(out), "procs ")
			if i < 0 {
				t.Fatalf("child printed no processor counts:\n%s", out)
			}
			if _, err := fmt.Sscanf(string(out[i:]), "procs %d %d", &before, &after); err != nil {
				t.Fatalf("child output %q: %v", out, err)
			}
			if after != before*c.factor {
				t.Errorf("processors %d before the gateway, %d after; want %d", before, after, before*c.factor)
			}
		})
	}
}
