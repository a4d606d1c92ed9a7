// Command streamcost measures what one JetStream stream's writes cost on
// this machine's disk, the way the ledger's committer makes them: a plain
// compare-and-set publish, an atomic batch of n messages, and n plain
// publishes in flight at once (embedded server in a temp dir, fsync on
// every write, as the gateway runs it). It prints
// medians. With -streams it measures how several streams' publishes go
// in parallel, against as many bare files' fsyncs; with -files only the
// bare files (-prealloc: into files allocated first, as a store that
// preallocated its blocks would write). With -plain it only
// sends plain publishes one after another for that long, for watching
// the system calls:
//
//	go run ./internal/streamcost
//	go run ./internal/streamcost -streams 1,4,16
//	go run ./internal/streamcost -files 1 -size 400 [-prealloc]
//	go build -o /tmp/streamcost ./internal/streamcost && strace -f -c -e trace=fsync,fdatasync,write,pwrite64 /tmp/streamcost -plain 2s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/portcullis-dev/portcullis/internal/benchkit"
)

func main() {
	plain := flag.Duration("plain", 0, "only send plain publishes one after another for this long (for strace)")
	size := flag.Int("size", 700, "bytes per message (a signed event is 500–900)")
	rounds := flag.Int("rounds", 100, "batches per size measured")
	streams := flag.String("streams", "", "instead: plain publishes from one caller per stream for 2 s, over these stream counts (comma-separated), one shared connection and one per stream; then the same counts of bare files, one writer each appending and fsyncing")
	files := flag.String("files", "", "instead: only the bare files of -streams, over these file counts (comma-separated)")
	flag.BoolVar(&prealloc, "prealloc", false, "with -files: allocate each file's space first (fallocate), so a sync writes no size change")
	flag.BoolVar(&noSublistCache, "no-sublist-cache", false, "run the server without its subject match cache (the gateway's embedded server runs with it)")
	flag.Parse()
	if *files != "" {
		if err := bareFiles(*files, *size); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *streams != "" {
		if err := parallel(*streams, *size); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*plain, *size, *rounds); err != nil {
		log.Fatal(err)
	}
}

var (
	noSublistCache bool
	prealloc       bool
)

// counts reads a comma-separated list of counts for flag name.
func counts(name, list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a count", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// bareFiles prints fsyncFiles for each count, with the CPU time (user and
// system: a sync's journal commit is the kernel's work) per sync.
func bareFiles(list string, size int) error {
	ns, err := counts("files", list)
	if err != nil {
		return err
	}
	for _, n := range ns {
		cpu0 := benchkit.CPUTime()
		rate, err := fsyncFiles(n, make([]byte, size))
		if err != nil {
			return err
		}
		fmt.Printf("%2d bare files, one writer each      %6d fsyncs/s  %4d µs CPU per sync\n", n, rate, (benchkit.CPUTime()-cpu0).Microseconds()/max(rate*int64(fsyncWindow/time.Second), 1))
	}
	return nil
}

// server starts the embedded server (sync always) in a temp dir; stop
// shuts it down and removes the dir.
func server() (ns *natsserver.Server, stop func(), err error) {
	dir, err := os.MkdirTemp("", "streamcost")
	if err != nil {
		return nil, nil, err
	}
	ns, err = natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, SyncAlways: true, NoSublistCache: noSublistCache})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ns.Start()
	stop = func() { ns.Shutdown(); os.RemoveAll(dir) }
	if !ns.ReadyForConnections(10 * time.Second) {
		stop()
		return nil, nil, fmt.Errorf("nats not ready")
	}
	return ns, stop, nil
}

// parallel measures plain compare-and-set publishes from one caller per
// stream, each waiting for its acknowledgement, for 2 s: how far several
// streams' fsyncs go in parallel at the server.
func parallel(list string, size int) error {
	payload := make([]byte, size)
	ns, err := counts("streams", list)
	if err != nil {
		return err
	}
	for _, n := range ns {
		for _, perStream := range []bool{false, true} {
			ns, stop, err := server()
			if err != nil {
				return err
			}
			conns := make([]*nats.Conn, n)
			for i := range conns {
				if i == 0 || perStream {
					if conns[i], err = nats.Connect(ns.ClientURL()); err != nil {
						stop()
						return err
					}
				} else {
					conns[i] = conns[0]
				}
				js, _ := jetstream.New(conns[i])
				if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S" + strconv.Itoa(i), Subjects: []string{fmt.Sprintf("s%d.>", i)}, Storage: jetstream.FileStorage}); err != nil {
					stop()
					return err
				}
			}
			var ops atomic.Int64
			errs := make([]error, n)
			var wg sync.WaitGroup
			until := time.Now().Add(2 * time.Second)
			for i := range n {
				wg.Go(func() {
					for time.Now().Before(until) {
						m := &nats.Msg{Subject: fmt.Sprintf("s%d.%s", i, nuid.Next()), Data: payload, Header: nats.Header{"Nats-Expected-Last-Subject-Sequence": {"0"}}}
						if _, err := conns[i].RequestMsg(m, 5*time.Second); err != nil {
							errs[i] = err
							return
						}
						ops.Add(1)
					}
				})
			}
			wg.Wait()
			for _, c := range conns {
				c.Close()
			}
			stop()
			if err := errors.Join(errs...); err != nil {
				return err
			}
			how := "one connection"
			if perStream {
				how = "a connection per stream"
			}
			fmt.Printf("%2d streams, %-24s %6d publishes/s\n", n, how, ops.Load()/2)
		}
		rate, err := fsyncFiles(n, payload)
		if err != nil {
			return err
		}
		fmt.Printf("%2d bare files, one writer each      %6d fsyncs/s\n", n, rate)
	}
	return nil
}

// fsyncWindow is how long fsyncFiles writes.
const fsyncWindow = 2 * time.Second

// fsyncFiles appends payload to each of n files and fsyncs it, one writer
// per file, for fsyncWindow: what the disk gives that many streams'
// stores, in fsyncs per second.
func fsyncFiles(n int, payload []byte) (int64, error) {
	dir, err := os.MkdirTemp("", "streamcost")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var ops atomic.Int64
	errs := make([]error, n)
	var wg sync.WaitGroup
	until := time.Now().Add(fsyncWindow)
	for i := range n {
		f, err := os.Create(fmt.Sprintf("%s/%d", dir, i))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if prealloc {
			if err := syscall.Fallocate(int(f.Fd()), 0, 0, 64<<20); err != nil {
				return 0, err
			}
			if err := f.Sync(); err != nil {
				return 0, err
			}
		}
		wg.Go(func() {
			for time.Now().Before(until) {
				if _, err := f.Write(payload); err != nil {
					errs[i] = err
					return
				}
				if err := f.Sync(); err != nil {
					errs[i] = err
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	return ops.Load() / int64(fsyncWindow/time.Second), errors.Join(errs...)
}

func run(plainFor time.Duration, size, rounds int) error {
	ns, stop, err := server()
	if err != nil {
		return err
	}
	defer stop()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true}); err != nil {
		return err
	}
	payload := make([]byte, size)
	msg := func() *nats.Msg {
		return &nats.Msg{Subject: "s." + nuid.Next() + "." + nuid.Next(), Data: payload, Header: nats.Header{"Nats-Expected-Last-Subject-Sequence": {"0"}}}
	}
	publish := func() error {
		_, err := nc.RequestMsg(msg(), 5*time.Second)
		return err
	}
	if plainFor > 0 {
		n := 0
		for t0 := time.Now(); time.Since(t0) < plainFor; n++ {
			if err := publish(); err != nil {
				return err
			}
		}
		fmt.Printf("%d plain publishes in %v\n", n, plainFor)
		return nil
	}
	median := func(f func() error) (time.Duration, error) {
		ds := make([]time.Duration, rounds)
		for i := range ds {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ds[i] = time.Since(t0)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}
	report := func(name string, f func() error) error {
		d, err := median(f)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("%-28s %v\n", name, d.Round(time.Microsecond))
		return nil
	}
	if err := report("plain publish", publish); err != nil {
		return err
	}
	for _, n := range []int{2, 4, 8, 16, 32, 64, 128} {
		if err := report(fmt.Sprintf("atomic batch of %d", n), func() error { return batch(nc, msg, n) }); err != nil {
			return err
		}
	}
	for _, n := range []int{4, 8, 16} {
		err := report(fmt.Sprintf("%d plain publishes at once", n), func() error {
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() { errs[i] = publish() })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// batch sends n messages as one atomic batch and waits for its commit.
func batch(nc *nats.Conn, msg func() *nats.Msg, n int) error {
	id := nuid.Next()
	for j := 1; j <= n; j++ {
		m := msg()
		m.Header["Nats-Batch-Id"] = []string{id}
		m.Header["Nats-Batch-Sequence"] = []string{strconv.Itoa(j)}
		if j < n {
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		m.Header["Nats-Batch-Commit"] = []string{"1"}
		r, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			return err
		}
		if len(r.Data) < 3 || r.Data[2] != 's' { // {"stream":…}, not {"error":…}
			return fmt.Errorf("batch refused: %s", r.Data)
		}
	}
	return nil
}
