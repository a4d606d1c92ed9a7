package jetstream

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"google.golang.org/protobuf/proto"
)

// Groups that want a signature while one is being made share the next
// one, and every event of every group verifies by itself with the
// signature and path it was given.
func TestGroupSignerSharesSignatures(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	s := NewGroupSigner(key)
	const groups = 12
	var (
		mu    sync.Mutex
		signs [][2]int // groups, events per signature
	)
	first := make(chan struct{})
	s.onSign = func(g, e int) {
		mu.Lock()
		signs = append(signs, [2]int{g, e})
		n := len(signs)
		mu.Unlock()
		if n == 1 {
			close(first)
			// The others arrive while the first signature is "being made".
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				s.mu.Lock()
				w := len(s.waiting)
				s.mu.Unlock()
				if w == groups-1 {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	events := make([][]*pb.Event, groups)
	for g := range groups {
		for i := range g%3 + 1 {
			events[g] = append(events[g], testEvent(fmt.Sprintf("t.s.%d.%d", g, i), nil))
		}
	}
	data := make([][][]byte, groups)
	var wg sync.WaitGroup
	run := func(g int) {
		defer wg.Done()
		var hashes [][]byte
		for _, ev := range events[g] {
			hashes = append(hashes, ev.GetHash())
		}
		gs, off := s.sign(hashes)
		for i, ev := range events[g] {
			b, err := proto.Marshal(ev)
			if err != nil {
				t.Error(err)
				return
			}
			data[g] = append(data[g], ledger.AppendGroupSignature(b, gs, off+i))
		}
	}
	wg.Add(1)
	go run(0)
	<-first
	for g := 1; g < groups; g++ {
		wg.Add(1)
		go run(g)
	}
	wg.Wait()
	if len(signs) != 2 || signs[0][0] != 1 || signs[1][0] != groups-1 {
		t.Fatalf("signatures made (groups, events each): %v; want one for the first group, one for the other %d", signs, groups-1)
	}
	ledger.ForgetOwnSignatures()
	for g := range groups {
		for i, b := range data[g] {
			ev := new(pb.Event)
			if err := proto.Unmarshal(b, ev); err != nil {
				t.Fatal(err)
			}
			if err := ledger.CheckSignature(ev, pub); err != nil {
				t.Errorf("group %d event %d: %v", g, i, err)
			}
			if ev.GetHash() == nil || string(ev.GetHash()) != string(events[g][i].GetHash()) {
				t.Errorf("group %d event %d: hash changed", g, i)
			}
		}
	}
}

// Groups that do not fit in one signature together are signed apart.
func TestTakeGroupsBoundsTheSignature(t *testing.T) {
	big := &signWait{hashes: make([][]byte, ledger.MaxGroupSize-1)}
	a, b := &signWait{hashes: make([][]byte, 1)}, &signWait{hashes: make([][]byte, 1)}
	take, rest := takeGroups(big, []*signWait{a, b})
	if len(take) != 2 || len(rest) != 1 || rest[0] != b {
		t.Fatalf("took %d, left %d; want the lead and one, one left", len(take), len(rest))
	}
}
