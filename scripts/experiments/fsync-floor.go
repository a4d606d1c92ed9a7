//go:build ignore

// fsync-floor times one writer appending 400-byte records to one file and
// syncing each, as nats-server does per plain publish under sync always:
// append + fsync, append + fdatasync, and the same into a file
// preallocated first. BENCHMARKS.md, "2026-12-06, 09:50–10:00 UTC". Run:
//
//	go run scripts/experiments/fsync-floor.go
//
// It writes under $TMPDIR (the suite's streams live there too).
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

const (
	records = 5000
	size    = 400
)

func main() {
	for range 3 {
		for _, c := range []struct {
			name               string
			prealloc, datasync bool
		}{
			{"append+fsync", false, false},
			{"append+fdatasync", false, true},
			{"prealloc+fsync", true, false},
			{"prealloc+fdatasync", true, true},
		} {
			if err := run(c.name, c.prealloc, c.datasync); err != nil {
				log.Fatal(err)
			}
		}
	}
}

func run(name string, prealloc, datasync bool) error {
	dir, err := os.MkdirTemp("", "fsync-floor")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := os.OpenFile(filepath.Join(dir, "blk"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	if prealloc {
		if err := syscall.Fallocate(fd, 0, 0, records*size+4096); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	rec := make([]byte, size)
	lat := make([]time.Duration, records)
	cpu0 := cpuTime()
	start := time.Now()
	for i := range records {
		t := time.Now()
		if _, err := f.WriteAt(rec, int64(i*size)); err != nil {
			return err
		}
		if datasync {
			err = syscall.Fdatasync(fd)
		} else {
			err = f.Sync()
		}
		if err != nil {
			return err
		}
		lat[i] = time.Since(t)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	slices.Sort(lat)
	fmt.Printf("%-20s %6.0f/s  p50 %4dµs  p99 %5dµs  CPU per sync %4dµs\n", name,
		records/elapsed.Seconds(), lat[records/2].Microseconds(), lat[records*99/100].Microseconds(),
		cpu.Microseconds()/records)
	return nil
}

// cpuTime is this process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
