package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
	pebbleviews "github.com/portcullis-dev/portcullis/projector/pebble"
)

// Rebuild throws the views away and folds them again from the streams,
// reporting progress. The gateway must not be running on the same data
// directory (Pebble's lock refuses a second opener).
func Rebuild(ctx context.Context, o Options, progress func(applied, total uint64)) error {
	n, lg, err := openForTool(o)
	if err != nil {
		return err
	}
	defer n.close()
	s, err := n.js.Stream(ctx, ledger.ExecutionsStream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", ledger.ExecutionsStream, err)
	}
	dir := filepath.Join(o.DataDir, "views")
	tmp := dir + ".rebuild"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	v, err := pebbleviews.Open(tmp)
	if err != nil {
		return err
	}
	p := projector.New(ledger.ExecutionsStream, ljs.Source{Stream: s}, v, lg)
	if err := p.CatchUp(ctx, progress); err != nil {
		v.Close()
		return fmt.Errorf("rebuild: %w", err)
	}
	if bs, err := n.js.Stream(ctx, keeper.Stream); err == nil {
		if err := projector.NewBudget(ljs.Source{Stream: bs}, v, lg).CatchUp(ctx, nil); err != nil {
			v.Close()
			return fmt.Errorf("rebuild budget views: %w", err)
		}
	}
	if err := v.Close(); err != nil {
		return err
	}
	// Swap only a complete rebuild in; a failed one leaves the old views.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
