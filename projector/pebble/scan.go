package pebble

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// EachExecution visits the current record of every execution the views
// hold, in subject order (operators' gauges: executions by state). It reads
// a snapshot of the views; it is a full scan, so callers cache its answer.
func (v *Views) EachExecution(fn func(x *pb.Execution)) error {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: headPrefix, UpperBound: prefixEnd(headPrefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		val := it.Value()
		if len(val) < 8 {
			return fmt.Errorf("view head %s: %w: short row", it.Key(), ledger.ErrCorrupt)
		}
		ev := new(pb.Event)
		if err := proto.Unmarshal(val[8:], ev); err != nil {
			return fmt.Errorf("view head %s: %w: %v", it.Key(), ledger.ErrCorrupt, err)
		}
		if x := ev.GetExecutionChanged().GetExecution(); x != nil {
			fn(x)
		}
	}
	return it.Error()
}

// EachAccount visits every budget account the views hold, by name.
func (v *Views) EachAccount(fn func(a *budget.Account)) error {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: accountPrefix, UpperBound: prefixEnd(accountPrefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		val := it.Value()
		if len(val) < 8+32 {
			return fmt.Errorf("view account %s: %w: short row", it.Key(), ledger.ErrCorrupt)
		}
		a := new(budget.Account)
		if err := json.Unmarshal(val[40:], a); err != nil {
			return fmt.Errorf("view account %s: %w: %v", it.Key(), ledger.ErrCorrupt, err)
		}
		fn(a)
	}
	return it.Error()
}
