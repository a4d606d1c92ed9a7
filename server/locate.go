package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/ledger"
)

// ErrNoLedger: an operator command was pointed at no ledger, or at a place
// that holds none. Commands never create an empty ledger to read.
var ErrNoLedger = errors.New("no ledger")

// locateWaitMax bounds the check that a NATS holds a ledger.
const locateWaitMax = 10 * time.Second

// checkSource says where the ledger is before anything is opened: a
// --nats-url, or a --data-dir that already holds an embedded JetStream.
func (o Options) checkSource() error {
	switch {
	case o.NatsURL != "":
		return nil
	case o.DataDir == "":
		return fmt.Errorf("%w: say where it is with --data-dir DIR (a gateway's data directory) or --nats-url URL (a running ledger's NATS)", ErrNoLedger)
	}
	st, err := os.Stat(filepath.Join(o.DataDir, "jetstream"))
	if err != nil || !st.IsDir() {
		return fmt.Errorf("%w in --data-dir %s: it has no jetstream directory (is it a gateway's data directory?)", ErrNoLedger, o.DataDir)
	}
	return nil
}

// checkStreams fails unless the executions stream exists.
func checkStreams(ctx context.Context, js jetstream.JetStream, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, locateWaitMax)
	defer cancel()
	_, err := js.Stream(ctx, ledger.ExecutionsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		where := o.NatsURL
		if where == "" {
			where = o.DataDir
		}
		return fmt.Errorf("%w at %s: stream %s does not exist", ErrNoLedger, where, ledger.ExecutionsStream)
	}
	if err != nil {
		return fmt.Errorf("find the ledger: %w", err)
	}
	return nil
}
