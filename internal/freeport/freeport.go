// Package freeport hands tests TCP ports on 127.0.0.1 that a child
// process (a `portcullis serve`, a NATS node) will listen on later.
//
// A port found by listening on :0 and closing is free only for a moment:
// the kernel hands the same ephemeral port to the next bind(0) of any
// process, and `go test ./...` runs several test binaries at once, each
// starting servers on random ports. CI saw it: a gateway's --listen port
// went to a NATS node of another package's cluster before the gateway
// bound it, and the test polled NATS for a minute.
//
// So a port comes from below the kernel's ephemeral range (which bind(0)
// never picks) and is reserved across processes by an flock on a file
// named after it, held until the test binary exits. Test binaries of one
// user share the locks; the kernel's own picks cannot land there at all.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lowest is the lowest port handed out.
const lowest = 15000

var (
	mu   sync.Mutex
	held = map[int]*os.File{} // the locks this process holds, kept open to its end
)

// Addr is "127.0.0.1:PORT" for a port Ports would hand out.
func Addr() (string, error) {
	p, err := Ports(1)
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p[0]), nil
}

// Take is Ports for a test, which it fails when no ports are found.
func Take(t testing.TB, n int) []int {
	t.Helper()
	ports, err := Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Ports are n distinct ports, each free now, outside the kernel's
// ephemeral range and handed out once among all processes using this
// package on the machine.
func Ports(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	hi := ephemeralLow()
	if hi-lowest < 1000 {
		return nil, fmt.Errorf("freeport: the ephemeral range starts at %d, leaving too few ports above %d", hi, lowest)
	}
	dir := lockDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("freeport: no free port found")
		}
		p := lowest + rand.IntN(hi-lowest)
		if _, mine := held[p]; mine {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // another process holds it
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			f.Close() // something outside this scheme listens there
			continue
		}
		ln.Close()
		held[p] = f
		out = append(out, p)
	}
	return out, nil
}

// lockDir holds the port locks of this user's test binaries (one per
// user, so a directory another user made never stands in the way).
func lockDir() string {
	return filepath.Join(os.TempDir(), "portcullis-test-ports-"+strconv.Itoa(os.Getuid()))
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}
