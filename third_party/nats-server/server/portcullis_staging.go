// Portcullis patch (see PORTCULLIS.md at the module's root): atomic batches
// of chosen one-replica file streams staged in a memory store.

package server

// A one-replica file stream stages each atomic batch in a file store of its
// own (<stream dir>/batches/<batch>, newBatchStore) until its commit: a
// directory, a metadata file, the staged messages synced, then everything
// unlinked, several fsyncs and file operations per batch in the stream's
// loop. The staging lets a commit cut short by a crash be finished at the
// next start (jetstream.go, "Restoring partial batch write"). A replicated
// stream stages in memory.
//
// StageAtomicBatchesInMemory makes a one-replica file stream stage in a
// memory store too, for batches whose messages are independent of each
// other: a commit cut short by a crash then leaves a prefix of the batch in
// the stream, which the next start cannot finish (it logs that it could
// not restore the batch). The commit itself is unchanged: the batch's
// messages are written to the stream and synced once before the
// acknowledgement.

// StageAtomicBatchesInMemory stages the atomic batches of stream (of account)
// begun from now on in memory; batches already staged stay where they are.
// The choice lasts while the server runs.
func (s *Server) StageAtomicBatchesInMemory(account, stream string) {
	s.portcullisMemStaging.Store(memStagingKey{account, stream}, struct{}{})
}

// stagesInMemory reports whether stream's atomic batches are staged in memory.
func (s *Server) stagesInMemory(account, stream string) bool {
	_, ok := s.portcullisMemStaging.Load(memStagingKey{account, stream})
	return ok
}

// memStagingKey names a marked stream in Server.portcullisMemStaging.
type memStagingKey struct{ account, stream string }
