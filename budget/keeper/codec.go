package keeper

import (
	"fmt"
	"time"

	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var kindTypes = map[budget.EventKind]pb.EventType{
	budget.LimitSet: pb.EventType_EVENT_TYPE_BUDGET_LIMIT_SET,
	budget.Reserved: pb.EventType_EVENT_TYPE_BUDGET_RESERVED,
	budget.Denied:   pb.EventType_EVENT_TYPE_BUDGET_DENIED,
	budget.Settled:  pb.EventType_EVENT_TYPE_BUDGET_SETTLED,
	budget.Released: pb.EventType_EVENT_TYPE_BUDGET_RELEASED,
}

// EventType is the envelope type of a budget event kind.
func EventType(k budget.EventKind) pb.EventType { return kindTypes[k] }

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tm(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime().UTC()
}

// ToProto is the stored (and API) form of a budget event.
func ToProto(e budget.Event) *pb.BudgetDecision { return toProto(e, nil) }

// holdCache shares one *pb.Hold per open hold among a commit group's
// decisions: each lists every hold open when it was decided, so a group of
// n decisions on a busy account would otherwise build n copies of the same
// tens of holds. The decisions are read-only once built.
type holdCache map[budget.Hold]*pb.Hold

func (c holdCache) hold(h budget.Hold) *pb.Hold {
	if p, ok := c[h]; ok {
		return p
	}
	p := &pb.Hold{OperationKey: h.OperationKey, RequestDigest: h.RequestDigest, Amount: h.Amount}
	if c != nil {
		c[h] = p
	}
	return p
}

func toProto(e budget.Event, holds holdCache) *pb.BudgetDecision {
	d := &pb.BudgetDecision{
		Outcome: string(e.Kind), Account: e.Account, OperationKey: e.OperationKey, RequestDigest: e.RequestDigest,
		Amount: e.Amount, Currency: e.Currency, Limit: e.Limit, LimitDigest: e.LimitDigest,
		SpentSeen: e.SpentSeen, HeldSeen: e.HeldSeen, AccountVersion: e.AccountVersion,
		Remainder: e.Remainder, At: ts(e.At), Reason: e.Reason,
	}
	if e.IsDecision() { // set, false included, so a denial shows within_limit: false
		d.WithinLimit, d.Allowed = proto.Bool(e.WithinLimit), proto.Bool(e.Allowed)
	}
	if len(e.HeldListSeen) > 0 {
		d.HeldListSeen = make([]*pb.Hold, len(e.HeldListSeen))
		for i, h := range e.HeldListSeen {
			d.HeldListSeen[i] = holds.hold(h)
		}
	}
	if e.Override != nil {
		d.Override = &pb.Override{By: e.Override.By, Reason: e.Override.Reason}
	}
	if e.Evidence != nil {
		d.Evidence = &pb.Evidence{ExecutionId: e.Evidence.ExecutionID, TargetStatus: e.Evidence.TargetStatus, Note: e.Evidence.Note}
	}
	if l := e.LimitRecord; l != nil {
		d.LimitRecord = &pb.LimitRecord{Account: l.Account, Currency: l.Currency, Limit: l.Limit,
			ValidFrom: ts(l.ValidFrom), ValidUntil: ts(l.ValidUntil), Delegator: l.Delegator}
	}
	if e.IsDecision() {
		d.Total = e.SpentSeen + e.HeldSeen + e.Amount
	}
	return d
}

// FromProto reads a stored budget event back into the domain.
func FromProto(d *pb.BudgetDecision) budget.Event {
	e := budget.Event{
		Kind: budget.EventKind(d.GetOutcome()), Account: d.GetAccount(), AccountVersion: d.GetAccountVersion(),
		At: tm(d.GetAt()), Currency: d.GetCurrency(), Limit: d.GetLimit(), LimitDigest: d.GetLimitDigest(),
		OperationKey: d.GetOperationKey(), RequestDigest: d.GetRequestDigest(), Amount: d.GetAmount(),
		SpentSeen: d.GetSpentSeen(), HeldSeen: d.GetHeldSeen(), WithinLimit: d.GetWithinLimit(), Allowed: d.GetAllowed(),
		Remainder: d.GetRemainder(), Reason: d.GetReason(),
	}
	if hs := d.GetHeldListSeen(); len(hs) > 0 {
		e.HeldListSeen = make([]budget.Hold, len(hs))
		for i, h := range hs {
			e.HeldListSeen[i] = budget.Hold{OperationKey: h.GetOperationKey(), RequestDigest: h.GetRequestDigest(), Amount: h.GetAmount()}
		}
	}
	if o := d.GetOverride(); o != nil {
		e.Override = &budget.Override{By: o.GetBy(), Reason: o.GetReason()}
	}
	if v := d.GetEvidence(); v != nil {
		e.Evidence = &budget.Evidence{ExecutionID: v.GetExecutionId(), TargetStatus: v.GetTargetStatus(), Note: v.GetNote()}
		if legacy := v.GetLegacyTargetStatus(); legacy != "" && v.GetTargetStatus() == 0 {
			e.Evidence.TargetStatus, e.Evidence.Note = budget.LegacyStatus(legacy, v.GetNote())
		}
	}
	if l := d.GetLimitRecord(); l != nil {
		e.LimitRecord = &budget.Limit{Account: l.GetAccount(), Currency: l.GetCurrency(), Limit: l.GetLimit(),
			ValidFrom: tm(l.GetValidFrom()), ValidUntil: tm(l.GetValidUntil()), Delegator: l.GetDelegator()}
	}
	return e
}

// AccountProto is the API form of an account.
func AccountProto(a *budget.Account) *pb.Account {
	if a == nil {
		return nil
	}
	return &pb.Account{
		Account: a.Name, Currency: a.Currency, Limit: a.Limit, Spent: a.Spent, Held: a.Held,
		LimitDigest: a.LimitDigest, Version: a.Version, Delegator: a.Delegator,
		ValidFrom: ts(a.ValidFrom), ValidUntil: ts(a.ValidUntil),
	}
}

// DecodeStored reads a stored budget event: the envelope, its hash, and
// the domain events it carries (one, or a commit group's members in order).
func DecodeStored(data []byte) (*pb.Event, []budget.Event, error) {
	ev := new(pb.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ledger.ErrCorrupt, err)
	}
	if err := ledger.CheckHash(ev); err != nil {
		return nil, nil, err
	}
	ds, err := Decisions(ev)
	if err != nil {
		return nil, nil, err
	}
	out := make([]budget.Event, len(ds))
	for i, d := range ds {
		out[i] = FromProto(d)
	}
	return ev, out, nil
}
