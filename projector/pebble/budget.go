package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
)

// Budget key layout.
var (
	accountPrefix  = []byte("b/")  // account → 8-byte seq + 32-byte hash + account JSON (without closed operations)
	closedPrefix   = []byte("bc/") // account "/" operation key → closed operation JSON
	decisionPrefix = []byte("d/")  // account "/" 8-byte seq → the event's 32-byte hash (before 2026-12-06: the stored event)
	// account → 8-byte seq of the account subject's last message while it
	// holds only quarantined ones (a new account's first decision expects it)
	accountTipPrefix = []byte("bt/")
)

var (
	_ keeper.Views          = (*Views)(nil)
	_ projector.BudgetStore = (*Views)(nil)
)

// Account returns an account as folded.
func (v *Views) Account(_ context.Context, name string) (keeper.Head, error) {
	val, closer, err := v.db.Get(key(accountPrefix, name))
	if errors.Is(err, pebble.ErrNotFound) {
		// No account, but maybe quarantined messages on its subject: the
		// head carries their last sequence for the first decision's condition.
		tip, tcloser, terr := v.db.Get(key(accountTipPrefix, name))
		if terr == nil {
			defer tcloser.Close()
			if len(tip) == 8 {
				return keeper.Head{Seq: binary.BigEndian.Uint64(tip)}, ledger.ErrNotFound
			}
		}
		return keeper.Head{}, ledger.ErrNotFound
	}
	if err != nil {
		return keeper.Head{}, fmt.Errorf("view account %s: %w", name, err)
	}
	defer closer.Close()
	if len(val) < 8+32 {
		return keeper.Head{}, fmt.Errorf("view account %s: %w: short row", name, ledger.ErrCorrupt)
	}
	a := new(budget.Account)
	if err := json.Unmarshal(val[40:], a); err != nil {
		return keeper.Head{}, fmt.Errorf("view account %s: %w: %v", name, ledger.ErrCorrupt, err)
	}
	return keeper.Head{Seq: binary.BigEndian.Uint64(val), Hash: append([]byte(nil), val[8:40]...), Account: a}, nil
}

// ClosedOp returns one closed operation of an account. (A row written
// before closed operations had rows of their own keeps them in the account
// JSON, which Account returns.)
func (v *Views) ClosedOp(_ context.Context, account, opKey string) (budget.Closed, bool, error) {
	val, closer, err := v.get(closedKey(account, opKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return budget.Closed{}, false, nil
	}
	if err != nil {
		return budget.Closed{}, false, fmt.Errorf("view closed %s/%s: %w", account, opKey, err)
	}
	defer closer.Close()
	var c budget.Closed
	if err := json.Unmarshal(val, &c); err != nil {
		return budget.Closed{}, false, fmt.Errorf("view closed %s/%s: %w: %v", account, opKey, ledger.ErrCorrupt, err)
	}
	return c, true, nil
}

func closedKey(account, opKey string) []byte {
	return append(key(closedPrefix, account+"/"), opKey...)
}

// WriteBudget stores accounts, their closed operations (one row each),
// decision rows and the checkpoint in one batch.
func (v *Views) WriteBudget(accounts map[string]keeper.Head, rows []projector.BudgetRow, quarantined []*pb.Quarantined, mark projector.Mark) error {
	b := v.db.NewBatch()
	defer b.Close()
	if err := setQuarantined(b, quarantined); err != nil {
		return err
	}
	for name, h := range accounts {
		if h.Account == nil { // only quarantined messages so far
			if err := b.Set(key(accountTipPrefix, name), binary.BigEndian.AppendUint64(nil, h.Seq), nil); err != nil {
				return err
			}
			continue
		}
		for op, c := range h.Account.Closed {
			cj, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if err := b.Set(closedKey(name, op), cj, nil); err != nil {
				return err
			}
		}
		row := *h.Account
		row.Closed = nil // rows of their own, above
		js, err := json.Marshal(&row)
		if err != nil {
			return err
		}
		if len(h.Hash) != 32 {
			return fmt.Errorf("account %s: hash of %d bytes", name, len(h.Hash))
		}
		val := make([]byte, 8, 8+32+len(js))
		binary.BigEndian.PutUint64(val, h.Seq)
		val = append(append(val, h.Hash...), js...)
		if err := b.Set(key(accountPrefix, name), val, nil); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if len(r.Hash) != eventHashSize {
			return fmt.Errorf("account %s seq %d: event hash of %d bytes", r.Account, r.Seq, len(r.Hash))
		}
		if err := b.Set(decisionKey(r.Account, r.Seq), r.Hash, nil); err != nil {
			return err
		}
	}
	if err := setMark(b, keeper.Stream, mark); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	v.quarantined.Add(uint64(len(quarantined)))
	v.setApplied(keeper.Stream, mark.Seq)
	return nil
}

func decisionKey(account string, seq uint64) []byte {
	k := key(decisionPrefix, account+"/")
	return binary.BigEndian.AppendUint64(k, seq)
}

// eventHashSize is the length of an event's hash, a decision row's value.
const eventHashSize = 32

// ListDecisions pages through an account's events newest first. The page
// token is the stream sequence to continue below. A commit group's
// decisions share its sequence and are never split over two pages, so a
// page may end with a whole group beyond size. A row holds the event's
// hash; the event is read back from the budget stream (ReadBudgetFrom)
// and must be the one folded. The event every decision records (its held
// list above all, one hold per open operation) is most of the bytes the
// views would otherwise write per decision, on every gateway.
func (v *Views) ListDecisions(ctx context.Context, account string, before uint64, size int) ([]*pb.BudgetDecision, uint64, error) {
	lower := key(decisionPrefix, account+"/")
	upper := prefixEnd(lower)
	if before > 0 {
		upper = decisionKey(account, before)
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var out []*pb.BudgetDecision
	for ok := it.Last(); ok && len(out) < size; ok = it.Prev() {
		seq := binary.BigEndian.Uint64(it.Key()[len(it.Key())-8:])
		ev, err := v.decisionEvent(ctx, seq, it.Value())
		if err != nil {
			return nil, 0, err
		}
		ds, err := keeper.Decisions(ev)
		if err != nil {
			return nil, 0, fmt.Errorf("decision row: %w", err)
		}
		for i := len(ds) - 1; i >= 0; i-- { // a commit group, newest first; a page holds it whole
			ds[i].StreamSeq = seq
			out = append(out, ds[i])
		}
	}
	var next uint64
	if len(out) >= size && it.Valid() { // the loop stepped onto one more row
		next = out[len(out)-1].GetStreamSeq()
	}
	return out, next, it.Error()
}

// decisionEvent is the event of the decision row at seq: read back from
// the budget stream and checked against the hash the row holds, or, in a
// row written before rows held only the hash, the stored event itself.
func (v *Views) decisionEvent(ctx context.Context, seq uint64, row []byte) (*pb.Event, error) {
	if len(row) != eventHashSize {
		ev := new(pb.Event)
		if err := proto.Unmarshal(row, ev); err != nil {
			return nil, fmt.Errorf("%w: decision row: %v", ledger.ErrCorrupt, err)
		}
		return ev, nil
	}
	if v.budgetAt == nil {
		return nil, errors.New("decision row: no budget stream to read its event from")
	}
	ev, err := v.budgetAt(ctx, seq)
	if errors.Is(err, ledger.ErrNotFound) {
		// The stream denies delete and purge: a row whose event is gone
		// is damage, not an account or decision that does not exist.
		return nil, fmt.Errorf("%w: decision row: the budget stream holds no event at seq %d", ledger.ErrCorrupt, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("decision row: %w", err)
	}
	if !bytes.Equal(ev.GetHash(), row) {
		return nil, fmt.Errorf("%w: decision row: the budget stream's event at seq %d is not the one folded", ledger.ErrCorrupt, seq)
	}
	return ev, nil
}

// AccountNames lists up to size budget accounts by name, in name order.
func (v *Views) AccountNames(_ context.Context, size int) ([]string, error) {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: accountPrefix, UpperBound: prefixEnd(accountPrefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok && len(out) < size; ok = it.Next() {
		out = append(out, string(it.Key()[len(accountPrefix):]))
	}
	return out, it.Error()
}

// BudgetApplied is the budget stream sequence the views hold now.
func (v *Views) BudgetApplied() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.applied[keeper.Stream]
}
