//go:build linux

// Command fsynclat measures what one durable append costs the disk under a
// directory: it appends -size bytes to a fresh file and syncs it, -n times,
// and prints the latency's p50, p90 and p99 for fdatasync, for fsync, for
// fdatasync of writes into a file written out in advance (no size change,
// so no metadata to commit), and for appends into space reserved past the
// end (fallocate KEEP_SIZE: the size still grows). A one-caller append to
// the ledger cannot be faster than the first line; docs/performance.md ("One append at
// one caller, step by step") compares the two on this project's machine.
//
//	go run ./scripts/experiments/fsynclat -dir /path/on/the/disk
//
// Linux only (fdatasync), like the machine the measurements are on.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	n := flag.Int("n", 2000, "appends per mode")
	size := flag.Int("size", 300, "bytes per append")
	flag.Parse()
	fdatasync := func(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
	modes := []struct {
		name string
		prep prep
		sync func(*os.File) error
	}{
		{"append, fdatasync", fresh, fdatasync},
		{"append, fsync", fresh, (*os.File).Sync},
		{"overwrite, fdatasync", written, fdatasync},
		{"append into reserved", reserved, fdatasync},
		{"append into reserved, fsync", reserved, (*os.File).Sync},
	}
	for _, m := range modes {
		d, err := measure(*dir, *n, *size, m.prep, m.sync)
		if err != nil {
			log.Fatal(err)
		}
		slices.Sort(d)
		fmt.Printf("%-28s p50 %6.1f µs  p90 %6.1f µs  p99 %6.1f µs  (%d appends of %d bytes)\n", m.name,
			us(d[len(d)/2]), us(d[len(d)*9/10]), us(d[len(d)*99/100]), *n, *size)
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// prep is what the file holds before the appends.
type prep int

const (
	fresh    prep = iota // nothing
	written              // zeros over the whole range, synced: no size change, no metadata
	reserved             // the range allocated past the end (fallocate KEEP_SIZE): the size still grows
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h), which package
// syscall does not name.
const fallocKeepSize = 0x1

// measure times n writes of size bytes, each followed by sync, to a new
// file in dir (removed after).
func measure(dir string, n, size int, p prep, sync func(*os.File) error) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsynclat-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	switch p {
	case reserved:
		if err := syscall.Fallocate(int(f.Fd()), fallocKeepSize, 0, int64(n*size)); err != nil {
			return nil, fmt.Errorf("fallocate: %w", err)
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
	case written:
		if _, err := f.Write(make([]byte, n*size)); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, size)
	out := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
			return nil, err
		}
		if err := sync(f); err != nil {
			return nil, fmt.Errorf("sync: %w", err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
