package jetstream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/ledger"
)

// BenchmarkAppend measures the group committer alone: decisions of one or
// two messages (a Begin is two) from concurrent callers, at fsync-always.
func BenchmarkAppend(b *testing.B) {
	for _, msgs := range []int{1, 2} {
		for _, callers := range []int{1, 4, 16, 64, 256} {
			b.Run(fmt.Sprintf("msgs=%d/callers=%d", msgs, callers), func(b *testing.B) {
				var commits, batched atomic.Int64
				l := openTestLog(b, Options{OnCommit: func(messages int, _ time.Duration) {
					commits.Add(1)
					if messages > 1 {
						batched.Add(1)
					}
				}})
				ev := testEvent("t.x", nil)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for c := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							m := make([]ledger.Message, msgs)
							for k := range m {
								m[k] = ledger.Message{Subject: fmt.Sprintf("t.%d.%d.%d", c, i, k), Event: ev}
							}
							if _, err := l.Append(context.Background(), m...); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
				b.ReportMetric(float64(batched.Load())/float64(b.N), "batches/decision")
				b.ReportMetric(float64(b.N*msgs)/float64(commits.Load()), "msgs/commit")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
