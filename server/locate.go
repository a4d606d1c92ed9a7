package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoLedger: an operator command was pointed at no ledger, or at a place
// that holds none. Commands never create an empty ledger to read.
var ErrNoLedger = errors.New("no ledger")

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
