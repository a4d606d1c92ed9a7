package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/portcullis-dev/portcullis/internal/natsauth"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/projector"
)

// ReadBudget delivers every budget event the ledger holds now, in stream
// order, for export and offline verification. Given the data dir of a
// running gateway it reads through that gateway's server (openRunning).
func ReadBudget(ctx context.Context, o Options, deliver func(seq uint64, d *pb.BudgetDecision) error) error {
	n, _, err := openForToolAs(o, natsauth.Finance)
	if err != nil {
		return err
	}
	defer n.close()
	s, err := n.js.Stream(ctx, keeper.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // no budget yet
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", keeper.Stream, err)
	}
	return ljs.Source{Stream: s}.ReadAll(ctx, func(e projector.Entry) error {
		ev, _, err := keeper.DecodeStored(e.Data)
		if err != nil {
			return fmt.Errorf("%s seq %d: %w", keeper.Stream, e.Seq, err)
		}
		ds, _ := keeper.Decisions(ev) // DecodeStored checked them
		for _, d := range ds {        // a commit group: each decision in order, with the group's sequence
			d.StreamSeq = e.Seq
			if err := deliver(e.Seq, d); err != nil {
				return err
			}
		}
		return nil
	})
}
