package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// One execution, for the tests of a single head.
const (
	testID      = "act_01M8RC0WVC1SVYYKBZ5A5NRX1Z"
	testSubject = "pc.exec.f1." + testID
)

// openViews opens views in a temp dir, closed when the test ends (after
// the test's own goroutines, which each test stops before it returns).
func openViews(t *testing.T) *Views {
	t.Helper()
	return reopenViews(t, t.TempDir())
}

// The dispatched index holds an execution only while it is DISPATCHED,
// under its latest deadline, and Overdue reads only what is due.
func TestOverdueIndex(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ev := func(s pb.State, deadline time.Time) *pb.Event {
		return &pb.Event{ExecutionId: testID, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{ExecutionId: testID, State: s, DispatchDeadline: timestamppb.New(deadline)}}}}
	}
	seq := uint64(0)
	write := func(next, replaced *pb.Event) {
		t.Helper()
		seq++
		row := projector.Row{Subject: testSubject, Seq: seq, Event: next, Replaced: replaced}
		if err := v.Write("S", []projector.Row{row}, nil, nil, projector.Mark{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	overdue := func(at time.Time) []string {
		t.Helper()
		ids, err := v.Overdue(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	d1 := ev(pb.State_STATE_DISPATCHED, t0.Add(time.Second))
	write(d1, nil)
	if got := overdue(t0.Add(time.Second - time.Nanosecond)); len(got) != 0 {
		t.Fatalf("due before its deadline: %v", got)
	}
	if got := overdue(t0.Add(time.Second)); !slices.Equal(got, []string{testID}) {
		t.Fatalf("at its deadline: %v", got)
	}
	// Resent (unknown outcome, dispatched again) folded as one row: the
	// old deadline's entry goes.
	d2 := ev(pb.State_STATE_DISPATCHED, t0.Add(time.Minute))
	write(d2, d1)
	if got := overdue(t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("stale entry under the first deadline: %v", got)
	}
	if got := overdue(t0.Add(time.Minute)); !slices.Equal(got, []string{testID}) {
		t.Fatalf("at the second deadline: %v", got)
	}
	// Leaving DISPATCHED removes it.
	write(ev(pb.State_STATE_OUTCOME_UNKNOWN, t0.Add(time.Minute)), d2)
	if got := overdue(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("left DISPATCHED but still indexed: %v", got)
	}
}

// Point lookups find what is there and nothing else once the rows sit in
// the bottom level (where they are read through its bloom filters).
func TestLookupsAfterCompaction(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	var rows []projector.Row
	intents := map[string]projector.Intent{}
	for i := range 1000 {
		id := fmt.Sprintf("act_%04d", i)
		subj := "pc.exec.tok" + strconv.Itoa(i) + "." + id
		ev := &pb.Event{ExecutionId: id, Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution: &pb.Execution{ExecutionId: id, State: pb.State_STATE_ACCEPTED}}}}
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, projector.Row{Subject: subj, Seq: uint64(i + 1), Data: data, Event: ev, Accepted: true})
		intents["tok"+strconv.Itoa(i)] = projector.Intent{Seq: uint64(i + 1), LatestSubject: subj}
	}
	if err := v.Write("S", rows, intents, nil, projector.Mark{Seq: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := v.db.Compact(ctx, []byte("a"), []byte("z"), false); err != nil {
		t.Fatal(err)
	}
	v.dropCaches() // read what Pebble holds
	for _, i := range []int{0, 517, 999} {
		in, err := v.Intent(ctx, "tok"+strconv.Itoa(i))
		if err != nil || in.Latest.Event.GetExecutionId() != fmt.Sprintf("act_%04d", i) {
			t.Fatalf("intent %d: %v %v", i, in, err)
		}
		if subj, err := v.ExecutionSubject(ctx, fmt.Sprintf("act_%04d", i)); err != nil || subj != rows[i].Subject {
			t.Fatalf("execution %d: %q %v", i, subj, err)
		}
	}
	for _, tok := range []string{"tok1000", "tok", "tok5170", "to"} {
		if _, err := v.IntentRow(tok); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("intent %q: %v, want not found", tok, err)
		}
	}
	if _, err := v.Head(ctx, rows[5].Subject+"x"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("head of a longer subject: %v", err)
	}
}

// A head row keeps the stored event but its signature and group proof
// (outside the hash): Head returns every other field as stored, and a row
// written with the whole event (before) reads the same.
func TestHeadRowWithoutSignature(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	ev := &pb.Event{EventId: "evt_1", Type: pb.EventType_EVENT_TYPE_ATTACHED, Subject: testSubject, ExecutionId: testID, TimeUnixNano: 42, GatewayId: "gw-a",
		PrevHash: []byte("prev-hash-32-bytes-0123456789abc"), Hash: []byte("hash-32-bytes-0123456789abcdefgh"),
		Signature: make([]byte, 64), GroupPath: [][]byte{make([]byte, 32), make([]byte, 32)}, GroupIndex: 3, GroupSize: 4,
		Body: &pb.Event_ExecutionChanged{ExecutionChanged: &pb.ExecutionChanged{
			Execution:   &pb.Execution{ExecutionId: testID, State: pb.State_STATE_ACCEPTED, AttachCount: 1},
			Correlation: &pb.Correlation{JsonrpcId: "7", SessionId: "s"}}}}
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	// Write takes the row's event: it gets a copy.
	if err := v.Write("S", []projector.Row{{Subject: testSubject, Seq: 9, Data: data, Event: proto.Clone(ev).(*pb.Event), Accepted: true}}, nil, nil, projector.Mark{Seq: 9}); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(ev).(*pb.Event)
	want.Signature, want.GroupPath, want.GroupIndex, want.GroupSize = nil, nil, 0, 0
	// The same head from the cache Write filled and from the row itself.
	cached, err := v.Head(ctx, testSubject)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := v.storedHead(testSubject)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []ledger.Head{cached, stored} {
		if h.Seq != 9 || !proto.Equal(h.Event, want) {
			t.Fatalf("head %d %v, want 9 %v", h.Seq, h.Event, want)
		}
	}
	val, closer, err := v.get(key(headPrefix, testSubject))
	if err != nil {
		t.Fatal(err)
	}
	n := len(val)
	closer.Close()
	if n >= 8+len(data)-64-64 {
		t.Fatalf("head row %d bytes of a %d-byte event: signature and path kept", n, len(data))
	}
	// A row of the whole event, as written before.
	old := binary.BigEndian.AppendUint64(nil, 9)
	if h, err := decodeHead(testSubject, append(old, data...)); err != nil || !proto.Equal(h.Event, ev) {
		t.Fatalf("whole-event row: %v %v", h.Event, err)
	}
}

// A mark read while the projector writes is one the views held at once:
// the sealer signs it as a checkpoint, so a sequence paired with a later
// digest would be a checkpoint the events do not hash to.
func TestMarkReadDuringWritesIsConsistent(t *testing.T) {
	v := openViews(t)
	digest := func(seq uint64) []byte { return []byte(strconv.FormatUint(seq, 10)) }
	const writes = 3000
	done, stop := make(chan error, 1), make(chan struct{})
	go func() {
		for seq := uint64(1); seq <= writes; seq++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := v.Write("S", nil, nil, nil, projector.Mark{Seq: seq, Digest: digest(seq)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d marks read during %d writes", reads, writes)
			return
		default:
		}
		m, err := v.Mark("S")
		if err == nil && m.Seq != 0 && string(m.Digest) != string(digest(m.Seq)) {
			err = fmt.Errorf("mark at sequence %d carries the digest of %s", m.Seq, m.Digest)
		}
		if err != nil {
			close(stop)
			<-done // the writer stops before the deferred Close
			t.Fatal(err)
		}
	}
}

// A decision that waited for the views to reach a sequence reads a head at
// least that new: the cache Write fills moves before the checkpoint does,
// and a later row replaces an earlier one.
func TestHeadAfterWaitForIsAtLeastThatNew(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	const writes = 2000
	rows := make([]projector.Row, writes+1) // made here: the writer may not call t.Fatal
	for seq := uint64(1); seq <= writes; seq++ {
		ev := &pb.Event{EventId: "evt_" + strconv.FormatUint(seq, 10), Subject: testSubject, ExecutionId: testID, Signature: make([]byte, 64)}
		data, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		rows[seq] = projector.Row{Subject: testSubject, Seq: seq, Data: data, Event: ev, Accepted: seq == 1}
	}
	done := make(chan error, 1)
	go func() {
		for seq := uint64(1); seq <= writes; seq++ {
			if err := v.Write(ledger.ExecutionsStream, rows[seq:seq+1], nil, nil, projector.Mark{Seq: seq}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var failed error
	for seq := uint64(1); seq <= writes && failed == nil; seq += 7 {
		if failed = v.WaitFor(ctx, seq); failed != nil {
			break
		}
		h, err := v.Head(ctx, testSubject)
		if err == nil && (h.Seq < seq || h.Event.GetEventId() != "evt_"+strconv.FormatUint(h.Seq, 10) || h.Event.GetSignature() != nil) {
			err = fmt.Errorf("after WaitFor(%d): head %d %v", seq, h.Seq, h.Event)
		}
		failed = err
	}
	if err := <-done; err != nil { // the writer ends before the deferred Close
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	h, err := v.Head(ctx, testSubject)
	if err != nil || h.Seq != writes {
		t.Fatalf("last head %d %v, want %d", h.Seq, err, writes)
	}
}

// dropCaches forgets the recent rows and the row filter, so reads go
// to Pebble.
func (v *Views) dropCaches() {
	v.dropRecent()
	v.present = newRowFilter(rowFilterFirstCap) // never ready: every lookup reads Pebble
}

// dropRecent forgets the recent rows only.
func (v *Views) dropRecent() { v.heads, v.intents = newHeadCache(), newIntentCache() }

// The cache stays within its bounds (two generations of at most its
// entries and bytes each) and always holds the latest generation: what it
// drops is read from Pebble again.
func TestRecentCacheBounds(t *testing.T) {
	const entries, bytes = 100, 1000
	c := newRecentCache[int](entries, bytes)
	c.put("a", 1, bytes/2)
	c.put("a", 2, bytes/2) // replacing an entry does not count it twice
	if r, ok := c.get("a"); !ok || r != 2 || c.bytes != bytes/2 {
		t.Fatalf("a replaced: cached %v %d, %d bytes", ok, r, c.bytes)
	}
	c.put("b", 3, bytes/2+1) // over the byte bound: a new generation
	if r, ok := c.get("a"); !ok || r != 2 || c.bytes != bytes/2+1 {
		t.Fatalf("a written one generation ago: cached %v %d, %d bytes", ok, r, c.bytes)
	}
	c.put("a", 4, 1) // written again: the current generation answers
	if r, _ := c.get("a"); r != 4 {
		t.Fatalf("a written again: cached %d, want 4", r)
	}
	for i := range 3 * entries {
		c.put(strconv.Itoa(i), i, 1)
		if len(c.cur) > entries || len(c.prev) > entries || c.bytes > bytes {
			t.Fatalf("after %d puts: %d + %d entries, %d bytes; bound %d, %d", i+1, len(c.cur), len(c.prev), c.bytes, entries, bytes)
		}
	}
	for i := 2 * entries; i < 3*entries; i++ { // the latest generation's worth
		if r, ok := c.get(strconv.Itoa(i)); !ok || r != i {
			t.Fatalf("key %d of the latest %d: cached %v %d", i, entries, ok, r)
		}
	}
	if _, ok := c.get("b"); ok {
		t.Fatal("b, three generations ago, still cached")
	}
}

// What the caches answer is what Pebble holds: many batches overwrite
// heads and intents at random, over more keys than a generation holds,
// and every key reads the same through the caches as from Pebble alone.
func TestRecentCachesAgreeWithPebble(t *testing.T) {
	v := openViews(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := headCacheEntries + headCacheEntries/2
	var seq uint64
	for range 40 {
		var rows []projector.Row
		intents := map[string]projector.Intent{}
		seen := map[int]bool{}
		for range 2000 {
			k := rng.IntN(keys)
			if seen[k] {
				continue // one row per subject in a batch, as the projector writes
			}
			seen[k] = true
			seq++
			subj := fmt.Sprintf("pc.exec.tok%d.act_%d", k, k)
			ev := &pb.Event{EventId: fmt.Sprintf("evt_%d", seq), ExecutionId: fmt.Sprintf("act_%d", k)}
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, projector.Row{Subject: subj, Seq: seq, Data: data, Event: ev})
			intents[fmt.Sprintf("tok%d", k)] = projector.Intent{Seq: seq, LatestSubject: subj}
		}
		if err := v.Write("S", rows, intents, nil, projector.Mark{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	cachedHeads, cachedIntents := v.heads, v.intents
	type answer struct {
		headSeq   uint64
		eventID   string
		intentSeq uint64
		subject   string
		err       string
	}
	read := func(k int) answer {
		var a answer
		h, herr := v.Head(ctx, fmt.Sprintf("pc.exec.tok%d.act_%d", k, k))
		in, ierr := v.IntentRow(fmt.Sprintf("tok%d", k))
		a.headSeq, a.eventID, a.intentSeq, a.subject = h.Seq, h.Event.GetEventId(), in.Seq, in.LatestSubject
		a.err = fmt.Sprint(herr, ierr)
		return a
	}
	hits := 0
	for k := range keys {
		v.heads, v.intents = cachedHeads, cachedIntents
		if _, ok := cachedIntents.get(fmt.Sprintf("tok%d", k)); ok {
			hits++
		}
		got := read(k)
		v.dropCaches()
		if want := read(k); got != want {
			t.Fatalf("key %d: through the caches %+v, Pebble %+v", k, got, want)
		}
	}
	if hits < intentCacheEntries {
		t.Fatalf("%d of %d intents answered by the cache, want at least a generation (%d)", hits, keys, intentCacheEntries)
	}
}

// A wait for a sequence the views do not hold yet is told to OnBehind once
// (so the stream's reader can fetch it); a wait the views already answer
// is not.
func TestWaitBehindIsTold(t *testing.T) {
	v := openViews(t)
	type told struct {
		stream string
		seq    uint64
	}
	var mu sync.Mutex
	var got []told
	v.OnBehind(func(stream string, seq uint64) {
		mu.Lock()
		got = append(got, told{stream, seq})
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := v.WaitFor(ctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor(3) on empty views: %v, want the deadline", err)
	}
	if err := v.WaitFor(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []told{{ledger.ExecutionsStream, 3}}; !slices.Equal(got, want) {
		t.Fatalf("told %v, want %v", got, want)
	}
}

// A put in the steady state: the cache full, generations turning over.
// Each generation's map starts at the size the one before reached, so it
// does not grow (and rehash) its way there again.
func BenchmarkRecentCachePut(b *testing.B) {
	c := newHeadCache()
	keys := make([]string, 4*headCacheEntries)
	for i := range keys {
		keys[i] = "pc.exec." + strconv.Itoa(i*7919)
	}
	for _, k := range keys { // two generations full
		c.put(k, ledger.Head{}, 256)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.put(keys[i%len(keys)], ledger.Head{Seq: uint64(i)}, 256)
	}
}
