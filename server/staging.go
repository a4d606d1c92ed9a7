package server

// Atomic batches of the execution streams staged in memory.
//
// nats-server stages every atomic batch of a one-replica file stream in a
// file store of its own (<stream dir>/batches/<batch>) before it commits the
// batch: a directory, a metadata file, the staged messages synced, then
// everything unlinked, all in the stream's one loop. That cost a small
// group commit more than sending its decisions as plain publishes, and it
// was a tenth of Begin's CPU at 64 callers even on a tmpfs
// (docs/performance.md, "Batches staged in a memory store"). The staging exists so
// that a commit cut short by a crash can be finished at the next start; a
// replicated stream stages in memory.
//
// The embedded server (third_party/nats-server, PORTCULLIS.md) stages the
// execution streams' batches in a memory store. The commit itself is
// unchanged: the batch's messages are written to the stream and synced
// once before the server acknowledges it, so an acknowledged decision is as
// durable as before. What changes is the repair of a commit cut short:
// after a crash of the process, the OS or the power the staged batch is
// gone, and the stream may keep a prefix of a batch nobody was told of (the
// server logs at its start that it could not restore it). An execution
// stream's batches are groups of independent one-message decisions (the
// ledger never appends several messages at once there), so such a prefix is
// a set of appends whose acknowledgement was lost, which the recovery table
// already handles (ErrAppendUnknown). The budget and sessions streams
// append multi-message decisions that must land whole; they keep staging on
// disk.

import "fmt"

// Batch staging modes (Options.BatchStaging, --batch-staging).
const (
	// StagingMemory stages the execution streams' atomic batches in memory
	// where the embedded server runs (the default).
	StagingMemory = "memory"
	// StagingDisk leaves the staging where nats-server puts it.
	StagingDisk = "disk"
)

// checkStaging refuses an unknown --batch-staging.
func checkStaging(mode string) error {
	switch mode {
	case "", StagingMemory, StagingDisk:
		return nil
	}
	return fmt.Errorf("--batch-staging %q: want %q or %q", mode, StagingMemory, StagingDisk)
}

// StageInMemory stages the atomic batches of stream, one the gateway's
// embedded server holds but the ledger does not own (the benchmarks' raw
// ceiling), in memory as the gateway stages its execution streams'; not
// with --batch-staging disk or an outside NATS, where the server stages on
// disk.
func (g *Gateway) StageInMemory(stream string) {
	if g.staging == StagingDisk || g.nats.server == nil {
		return
	}
	g.nats.server.StageAtomicBatchesInMemory(g.nats.server.GlobalAccount().GetName(), stream)
}
