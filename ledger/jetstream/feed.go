package jetstream

import (
	"sync"
	"sync/atomic"

	"github.com/portcullis-dev/portcullis/projector"
)

// feedMax bounds the events a Feed holds for its projector. When the
// projector falls that far behind, further groups are dropped: it then
// finds a gap and reads the stream instead.
const feedMax = 1 << 16

// feedGroups bounds the commit groups a Feed holds (most hold several events).
const feedGroups = 8192

// Feed hands a projector the events its own gateway's committer has just
// seen acknowledged: the stored bytes, at the sequences the stream's
// acknowledgement gave. A projector that folds them needs no message from
// the server for its own writes; what the feed lacks (another gateway's
// events, a write whose answer was lost, a forged message) it reads from
// the stream (Source.Tail).
//
// A Feed is a hint and never the only record: an entry it drops or never
// had is read from the stream.
type Feed struct {
	entries chan []projector.Entry
	held    atomic.Int64  // events in entries
	wants   chan struct{} // a reader waits for a sequence the feed may not bring

	mu     sync.Mutex
	wanted uint64 // the highest sequence asked for

	fed, read, reads atomic.Uint64 // FeedStats
}

// FeedStats counts how the events of a fed source (Source with a Feed)
// reached its projector.
type FeedStats struct {
	Fed   uint64 // events folded from the feed: this gateway's writes
	Read  uint64 // events folded from the stream: everything the feed did not bring
	Reads uint64 // times the source started reading the stream
}

// Stats reads the counts so far.
func (f *Feed) Stats() FeedStats {
	return FeedStats{Fed: f.fed.Load(), Read: f.read.Load(), Reads: f.reads.Load()}
}

// NewFeed returns an empty Feed.
func NewFeed() *Feed {
	return &Feed{entries: make(chan []projector.Entry, feedGroups), wants: make(chan struct{}, 1)}
}

// offer passes on one acknowledged commit group, in sequence order, without
// waiting: a full feed drops it.
func (f *Feed) offer(es []projector.Entry) {
	n := int64(len(es))
	if f.held.Add(n) > feedMax {
		f.held.Add(-n)
		return
	}
	select {
	case f.entries <- es:
	default:
		f.held.Add(-n)
	}
}

// took notes that the reader took es out of the feed.
func (f *Feed) took(es []projector.Entry) {
	f.held.Add(-int64(len(es)))
}

// Want tells the feed's reader that someone waits for the views to hold
// seq, so that it reads the stream for it when the feed has not brought it
// within feedGapWait, rather than at its next look at the stream.
func (f *Feed) Want(seq uint64) {
	f.mu.Lock()
	if seq > f.wanted {
		f.wanted = seq
	}
	f.mu.Unlock()
	select {
	case f.wants <- struct{}{}:
	default:
	}
}

func (f *Feed) want() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wanted
}
