// Package ledger owns execution identity: the execution state machine, the
// matching rule that attaches a retry to a prior execution, the recovery
// table, the event chain, and the Service that decides with compare-and-set
// appends on the subject that owns each decision.
//
// It is domain code. It does no I/O of its own and imports no NATS, Pebble or
// Connect: it talks to the outside through two ports declared here, Log (the
// append-only source of truth) and Views (rebuildable read models). Adapters
// live in subpackages (ledger/jetstream) and in projector/pebble.
//
// Events and records are the protobuf messages of proto/portcullis/v1: the
// schema is the stored format, so the domain folds exactly what is appended.
package ledger
