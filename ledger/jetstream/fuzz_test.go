package jetstream

import (
	"testing"

	"github.com/portcullis-dev/portcullis/ledger"
)

// FuzzDecode: stored bytes (possibly tampered) never panic the decoder; what
// decodes has a valid hash.
func FuzzDecode(f *testing.F) {
	f.Add(mustMarshal(f, testEvent("t.a", nil)))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, 'e', 'v', 't'})
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Decode(data)
		if err != nil {
			return
		}
		if err := ledger.CheckHash(ev); err != nil {
			t.Fatalf("decoded event fails its hash: %v", err)
		}
	})
}
