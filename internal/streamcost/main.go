// Command streamcost measures what one JetStream stream's writes cost on
// this machine's disk, the way the ledger's committer makes them: a plain
// compare-and-set publish, an atomic batch of n messages, and n plain
// publishes in flight at once (embedded server in a temp dir, fsync on
// every write). It prints medians. With -plain it only sends plain
// publishes one after another for that long, for watching the system
// calls:
//
//	go run ./internal/streamcost
//	go build -o /tmp/streamcost ./internal/streamcost && strace -f -c -e trace=fsync,fdatasync,write,pwrite64 /tmp/streamcost -plain 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

func main() {
	plain := flag.Duration("plain", 0, "only send plain publishes one after another for this long (for strace)")
	size := flag.Int("size", 700, "bytes per message (a signed event is 500–900)")
	rounds := flag.Int("rounds", 100, "batches per size measured")
	flag.Parse()
	if err := run(*plain, *size, *rounds); err != nil {
		log.Fatal(err)
	}
}

func run(plainFor time.Duration, size, rounds int) error {
	dir, err := os.MkdirTemp("", "streamcost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, SyncAlways: true})
	if err != nil {
		return err
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats not ready")
	}
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
