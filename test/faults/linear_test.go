package faults

import (
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// decKind is what a client was told about an intent.
type decKind int

const (
	decNew      decKind = iota // Begin: DECISION_NEW
	decAttached                // Begin: DECISION_ATTACHED
	decAny                     // tools/call: an execution, decision not shown
)

// decision is one call that decides an intent (a Begin or a tools/call
// with an operation key), from invocation to answer. A call without an
// answer (cut, error) is pending: it may or may not have decided.
type decision struct {
	client    int
	key       string
	call, ret time.Time
	pending   bool
	kind      decKind
	id        string
}

type decisions struct {
	mu   sync.Mutex
	list []decision
}

func (d *decisions) add(x decision) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

// intentModel is one intent as a register set once: empty until its
// first execution is accepted, then that execution forever. NEW is legal
// only on the empty register and sets it; ATTACHED only returns what it
// holds; a tools/call's answer sets an empty register or returns it. A
// pending call sets the empty register to the execution the ledger holds
// (porcupine may also place it last, where it only attaches).
func intentModel(ledgerID string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, input, output any) (bool, any) {
			st, d := state.(string), output.(decision)
			switch {
			case d.pending:
				if st == "" {
					return true, ledgerID
				}
				return true, st
			case d.kind == decNew:
				return st == "" && d.id != "", d.id
			case d.kind == decAttached:
				return st != "" && d.id == st, st
			default:
				if st == "" {
					return d.id != "", d.id
				}
				return d.id == st, st
			}
		},
	}
}

// linearizable checks every intent's decisions; it returns the operation
// keys whose history has no linearization, and how many it checked.
func linearizable(d *decisions, ledgerIDs map[string]string, t0 time.Time) (bad []string, checked int) {
	d.mu.Lock()
	byKey := map[string][]porcupine.Operation{}
	for _, x := range d.list {
		ret := int64(math.MaxInt64)
		if !x.pending {
			ret = x.ret.Sub(t0).Nanoseconds()
		}
		byKey[x.key] = append(byKey[x.key], porcupine.Operation{ClientId: x.client, Input: x.key, Call: x.call.Sub(t0).Nanoseconds(), Output: x, Return: ret})
	}
	d.mu.Unlock()
	for _, k := range sortedKeys(byKey) {
		checked++
		if porcupine.CheckOperationsTimeout(intentModel(ledgerIDs[k]), byKey[k], 10*time.Second) == porcupine.Illegal {
			bad = append(bad, k)
		}
	}
	return bad, checked
}
