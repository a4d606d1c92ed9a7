package pebble

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/projector"
)

// keyedPrefix: fingerprint → subject of the latest execution begun with an
// operation key and that fingerprint. A retry without a key finds such an
// execution by its fingerprint (docs/matching.md, "A retry without the
// key"); executions begun without a key are found through their intent.
var keyedPrefix = []byte("fk/")

// setKeyed indexes a keyed execution's first event under its fingerprint.
// Events fold in stream order, so the row ends at the latest execution.
func (v *Views) setKeyed(b *pebble.Batch, r projector.Row) error {
	x := r.Event.GetExecutionChanged().GetExecution()
	if !r.Accepted || x.GetOperationKey() == "" || x.GetFingerprint() == "" {
		return nil
	}
	k := key(keyedPrefix, x.GetFingerprint())
	v.present.add(k) // before the row can be read: never a wrong "absent"
	return b.Set(k, []byte(r.Subject), nil)
}

// KeyedByFingerprint returns the subject of the latest execution begun with
// an operation key whose fingerprint is fp (ledger.ErrNotFound: none).
func (v *Views) KeyedByFingerprint(_ context.Context, fp string) (string, error) {
	k := key(keyedPrefix, fp)
	if v.present.absent(k) {
		return "", ledger.ErrNotFound
	}
	val, closer, err := v.get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", ledger.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("view keyed execution of %s: %w", fp, err)
	}
	defer closer.Close()
	return string(val), nil
}
