package jetstream

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxMsgBytes bounds one stored event (an execution record with its
// canonical action record and result body fits well below it).
const MaxMsgBytes = 1 << 20

// StreamSpec names a stream the ledger appends to.
type StreamSpec struct {
	Name     string
	Subjects []string
	Replicas int // 1 on the embedded server, 3 on a shared cluster
	// Description is what `nats stream info` shows an operator.
	Description string
}

// EnsureStream creates or updates the stream: file storage, delete and
// purge denied (the record is append-only), direct gets for catch-up reads,
// atomic batch publish for group commit.
func EnsureStream(ctx context.Context, js jetstream.JetStream, spec StreamSpec) (jetstream.Stream, error) {
	if spec.Replicas <= 0 {
		spec.Replicas = 1
	}
	cfg := jetstream.StreamConfig{
		Name:               spec.Name,
		Description:        spec.Description,
		Subjects:           spec.Subjects,
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Replicas:           spec.Replicas,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		MaxMsgSize:         MaxMsgBytes,
		Discard:            jetstream.DiscardNew,
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", spec.Name, err)
	}
	return s, nil
}
