package main

import (
	"context"
	"log/slog"

	"github.com/portcullis-dev/portcullis/internal/benchkit"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// rawCeiling is the raw JetStream ceiling measured the way the ledger uses
// it (benchkit.Raw), on a gateway's own embedded server (sync always).
func rawCeiling(shards int, mode benchkit.Mode) workload {
	return func(ctx context.Context, callers int) (opFunc, func(), error) {
		g, err := startGW(ctx, ledgerConfig, nil, "")
		if err != nil {
			return nil, nil, err
		}
		nc, err := g.connect(natsauth.Admin)
		if err != nil {
			g.close()
			return nil, nil, err
		}
		if shards > 1 {
			server.RaiseProcsForFsync(slog.New(slog.DiscardHandler)) // as a gateway of that many shards
		}
		r, err := benchkit.NewRaw(ctx, nc, shards, callers, mode, g.StageInMemory)
		if err != nil {
			nc.Close()
			g.close()
			return nil, nil, err
		}
		return func(_ context.Context, c, _ int) error { return r.Append(c) },
			func() { r.Close(); nc.Close(); g.close() }, nil
	}
}
