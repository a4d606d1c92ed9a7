package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Ports are distinct, below the ephemeral range, free, and reserved: the
// lock another process would take on each is held.
func TestPortsReservedOutsideEphemeralRange(t *testing.T) {
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	more, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range append(ports, more...) {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowest || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, ephemeralLow())
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		ln.Close()
		// A second open file description stands for another process.
		f, err := os.Open(filepath.Join(lockDir(), strconv.Itoa(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			t.Fatalf("port %d not reserved: another process could lock it", p)
		}
		f.Close()
	}
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if _, port, _ := net.SplitHostPort(addr); port == "" {
		t.Fatalf("Addr %q", addr)
	}
}
