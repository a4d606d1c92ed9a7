// Portcullis patch (see PORTCULLIS.md at the module's root): the last
// sequence of a subject, for compare-and-set publishes, without a block load.

package server

// The expected-last-subject-sequence check of a
// publish compares a sequence, but upstream finds it with LoadLastMsg,
// which loads the whole block that holds the subject's last message
// (an 8 MiB read and an index of every message in it when the block's
// cache has expired) in the stream's one loop, while every other publish
// of the stream waits. The per-subject index now keeps the subject's
// last sequence where it knows it (psi.lseq: set when a message is
// stored on the subject, cleared when any message of the subject is
// removed, unknown after a restart until the subject's next store), and
// the check reads it from there when it knows it for every subject the
// check names (Nats-Expected-Last-Subject-Sequence-Subject may be a filter).

// lastSeqForSubject is the sequence of the last message on subj, or 0 with
// ErrStoreMsgNotFound when the stream holds none, as the checks of
// Nats-Expected-Last-Subject-Sequence read it from LoadLastMsg.
func lastSeqForSubject(store StreamStore, subj string) (uint64, error) {
	if fs, ok := store.(*fileStore); ok {
		if seq, known := fs.knownLastSeq(subj); known {
			if seq == 0 {
				return 0, ErrStoreMsgNotFound
			}
			return seq, nil
		}
	}
	var smv StoreMsg
	sm, err := store.LoadLastMsg(subj, &smv)
	if sm == nil {
		return 0, err
	}
	return sm.seq, nil
}

// knownLastSeq answers from the per-subject index alone: the last
// sequence of the subjects subj matches (a literal subject or a filter
// with wildcards, as LoadLastMsg takes it), 0 when none holds a message,
// and known false when the index does not know the last sequence of one
// of them (the caller loads it).
func (fs *fileStore) knownLastSeq(subj string) (seq uint64, known bool) {
	if subj == _EMPTY_ || subj == fwcs {
		return 0, false // LoadLastMsg reads the stream's last message
	}
	fs.mu.RLock()
	defer fs.mu.RUnlock()
	if fs.isClosed() || fs.lmb == nil || fs.psim == nil || fs.noTrackSubjects() {
		return 0, false
	}
	if !subjectHasWildcard(subj) {
		info, ok := fs.psim.Find(stringToBytes(subj))
		if !ok {
			return 0, true
		}
		return info.lseq, info.lseq != 0
	}
	known = true
	fs.psim.Match(stringToBytes(subj), func(_ []byte, info *psi) {
		if info.lseq == 0 {
			known = false
		}
		seq = max(seq, info.lseq)
	})
	return seq, known
}
