// Package jetstream is the ledger's Log on NATS JetStream: streams on file
// storage that deny delete and purge, compare-and-set appends through
// expected-last-subject-sequence headers, and a group committer that
// coalesces concurrent decisions into atomic batches.
//
// It translates JetStream's answers once: wrong-last-sequence (10071, 10164)
// becomes ledger.ErrConflict, a missing answer becomes
// ledger.ErrAppendUnknown.
package jetstream
