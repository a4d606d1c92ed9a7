package jetstream

import (
	"crypto/ed25519"
	"sync"

	"github.com/portcullis-dev/portcullis/ledger"
)

// GroupSigner signs commit groups (ledger.SignGroup). Shared by several
// logs (a sharded ledger's execution lanes, each with its own committer),
// it gives groups that want a signature at the same time one signature
// between them: while one signature is being made, the groups that
// arrive wait and the first of them signs them all together next. Each
// event still verifies by itself with its path in the combined tree; an
// event's group may then span streams, which nothing reads as a unit.
// With one caller at a time nothing waits.
type GroupSigner struct {
	presigner *ledger.Presigner // nonces made ahead: a signature costs microseconds on the commit's path

	mu      sync.Mutex
	busy    bool        // a signature is being made
	waiting []*signWait // groups that arrived meanwhile, in order

	onSign func(groups, events int) // test hook: one signature made
}

type signWait struct {
	hashes [][]byte
	gs     ledger.GroupSignature
	offset int           // the group's first event in gs
	lead   bool          // woken to sign the waiting groups, not signed
	wake   chan struct{} // signed, or lead
}

// NewGroupSigner signs with key (none: nil, a log that signs nothing).
func NewGroupSigner(key ed25519.PrivateKey) *GroupSigner {
	if key == nil {
		return nil
	}
	return &GroupSigner{presigner: ledger.NewPresigner(key)}
}

// sign returns the group signature covering hashes and the place of
// hashes[0] in it (event i of the group is event offset+i of gs).
func (s *GroupSigner) sign(hashes [][]byte) (ledger.GroupSignature, int) {
	w := &signWait{hashes: hashes, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	if s.busy {
		s.waiting = append(s.waiting, w)
		s.mu.Unlock()
		<-w.wake
		if !w.lead {
			return w.gs, w.offset // signed with the others
		}
		s.mu.Lock() // w leads now; busy stays set
	} else {
		s.busy = true
	}
	group, rest := takeGroups(w, s.waiting)
	s.waiting = rest
	s.mu.Unlock()

	var all [][]byte
	for _, g := range group {
		g.offset = len(all)
		all = append(all, g.hashes...)
	}
	gs := s.presigner.SignGroup(all)
	if s.onSign != nil {
		s.onSign(len(group), len(all))
	}

	s.mu.Lock()
	if len(s.waiting) > 0 {
		next := s.waiting[0]
		s.waiting = s.waiting[1:]
		next.lead = true
		next.wake <- struct{}{}
	} else {
		s.busy = false
	}
	s.mu.Unlock()
	for _, g := range group[1:] {
		g.gs = gs
		g.wake <- struct{}{}
	}
	return gs, w.offset
}

// takeGroups is lead's group and the waiting groups after it, in order,
// while their events fit in one signature (ledger.MaxGroupSize).
func takeGroups(lead *signWait, waiting []*signWait) (take, rest []*signWait) {
	take = []*signWait{lead}
	n := len(lead.hashes)
	for i, g := range waiting {
		if n+len(g.hashes) > ledger.MaxGroupSize {
			return take, waiting[i:]
		}
		n += len(g.hashes)
		take = append(take, g)
	}
	return take, nil
}
