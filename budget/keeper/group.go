package keeper

import (
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/budget"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Commit groups. The decisions one group of commands makes on an account
// are appended as one message on the account's subject, under the one
// compare-and-set condition of the first decision: an EVENT_TYPE_BUDGET_GROUP
// event whose BudgetDecision.group lists them in order (one hash, one
// signature, one fsync for the group). A single decision stays an event of
// its own kind. A group too large for one message is split into several,
// appended together as one atomic batch.

// maxGroupBytes bounds the decisions one group message carries (well below
// the stream's 1 MiB message limit).
const maxGroupBytes = 256 << 10

// pack seals and signs the decisions into messages chained after prevHash
// on the account's subject, the first expecting seq; msgOf[i] is the
// message that carries decs[i].
func (k *Keeper) pack(account string, seq uint64, prevHash []byte, decs []*pb.BudgetDecision, now time.Time) ([]ledger.Message, []int) {
	var msgs []ledger.Message
	msgOf := make([]int, len(decs))
	add := func(part []*pb.BudgetDecision) {
		ev := &pb.Event{EventId: "evt_" + ulid.Make().String(), Subject: Subject(account), TimeUnixNano: now.UnixNano(), GatewayId: k.gatewayID}
		if len(part) == 1 {
			ev.Type, ev.Body = EventType(budget.EventKind(part[0].GetOutcome())), &pb.Event_BudgetChanged{BudgetChanged: part[0]}
		} else {
			ev.Type, ev.Body = pb.EventType_EVENT_TYPE_BUDGET_GROUP, &pb.Event_BudgetChanged{BudgetChanged: &pb.BudgetDecision{Account: account, Group: part}}
		}
		ledger.Seal(ev, prevHash)
		k.signEvent(ev)
		prevHash = ev.Hash
		msgs = append(msgs, ledger.Message{Subject: ev.Subject, ExpectedSeq: seq, Follows: len(msgs) > 0, Event: ev})
	}
	start, size := 0, 0
	for i, d := range decs {
		n := proto.Size(d)
		if i > start && size+n > maxGroupBytes {
			add(decs[start:i])
			start, size = i, 0
		}
		size += n
		msgOf[i] = len(msgs)
	}
	add(decs[start:])
	return msgs, msgOf
}

// Decisions are the budget decisions a stored budget event carries: the
// event's own, or each member of a commit group in order.
func Decisions(ev *pb.Event) ([]*pb.BudgetDecision, error) {
	d := ev.GetBudgetChanged()
	if d == nil {
		return nil, fmt.Errorf("%w: event %s is not a budget event", ledger.ErrCorrupt, ev.GetEventId())
	}
	if ev.GetType() != pb.EventType_EVENT_TYPE_BUDGET_GROUP {
		if len(d.GetGroup()) > 0 {
			return nil, fmt.Errorf("%w: event %s: a group in a %s event", ledger.ErrCorrupt, ev.GetEventId(), ev.GetType())
		}
		return []*pb.BudgetDecision{d}, nil
	}
	if len(d.GetGroup()) == 0 || d.GetOutcome() != "" {
		return nil, fmt.Errorf("%w: event %s: malformed commit group", ledger.ErrCorrupt, ev.GetEventId())
	}
	for _, m := range d.GetGroup() {
		if len(m.GetGroup()) > 0 || m.GetAccount() != d.GetAccount() {
			return nil, fmt.Errorf("%w: event %s: malformed commit group member", ledger.ErrCorrupt, ev.GetEventId())
		}
		if t := EventType(budget.EventKind(m.GetOutcome())); t == pb.EventType_EVENT_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("%w: event %s: group member of kind %q", ledger.ErrCorrupt, ev.GetEventId(), m.GetOutcome())
		}
	}
	return d.GetGroup(), nil
}

// signEvent signs a sealed event with SignKey (nothing without one),
// through a presigner made on first use and again if SignKey changed: a
// leader's group is signed in microseconds, its nonce made ahead.
func (k *Keeper) signEvent(ev *pb.Event) {
	if k.SignKey == nil {
		return
	}
	p := k.signer.Load()
	if p == nil || !p.Public().Equal(k.SignKey.Public()) {
		p = ledger.NewPresigner(k.SignKey)
		k.signer.Store(p)
	}
	p.SignEvent(ev)
}
