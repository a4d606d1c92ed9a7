package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Stored response-stream events are authenticated. PORTCULLIS_MCP_STREAMS
// is open to the gateway NATS user, so anyone with those credentials can
// publish onto a session's stream subject; before, After served whatever
// the subject held: a forged tools/call result, a forged server→client
// request (elicitation/create asking for an API key), and every inserted
// message shifted the indexes that Last-Event-ID and delivery evidence
// count (audit 6, mcp_inject.sh).
//
// Each event carries its index in its stream and an HMAC-SHA256 under the
// streams key over (session, stream, index, data). The streams key is
// derived from the fingerprint key, which every gateway of a ledger holds
// (only enrolled gateways are given it, sealed) and the NATS credentials
// do not open; it is a separate subkey, with its own label, so a MAC here
// is never a value that means something elsewhere (the fingerprint key's
// check value, HMAC(key, "portcullis key check v1"), is public). A MAC
// rather than an Ed25519 signature: two of these are on every 2025-11-25
// tools/call (the SSE priming event and the response); sealing and
// checking a 2 KiB event costs ~5 µs (BenchmarkStreamEventMAC), an Ed25519
// signature and verify ~100 µs (docs/trust.md, "Cost").
//
// Binding the index (not just the bytes) is what keeps a genuine event in
// its place: one copied to a later position, or into another stream or
// session, does not verify there (or repeats an index already served).
const (
	labelStreamsKey  = "portcullis mcp streams key v1"
	labelStreamEvent = "portcullis mcp stream event v1"

	headerEventIndex = "Portcullis-Event-Index"
	headerEventMAC   = "Portcullis-Event-Mac"
)

// Why a stored event was not served (the reason label of
// portcullis_quarantined_events_total{stream="PORTCULLIS_MCP_STREAMS"}).
const (
	// RejectMAC: no valid MAC under the streams key: not written by a
	// gateway of this ledger (or written before events carried one).
	RejectMAC = "mac"
	// RejectPosition: a genuine event whose index is not past the last one
	// read before it: a copy of an earlier event, replayed.
	RejectPosition = "position"
)

var errEventMAC = errors.New("no valid MAC under the ledger's streams key")

// StreamsKey derives the key that authenticates stored response-stream
// events from the ledger's fingerprint key.
func StreamsKey(fingerprintKey []byte) []byte {
	m := hmac.New(sha256.New, fingerprintKey)
	m.Write([]byte(labelStreamsKey))
	return m.Sum(nil)
}

// eventMAC is the MAC of one stored event: label, session id, stream id
// and data length-prefixed, the index as 8 bytes.
func eventMAC(key []byte, sessionID, streamID string, index int, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	put := func(h hash.Hash, b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put(m, []byte(labelStreamEvent))
	put(m, []byte(sessionID))
	put(m, []byte(streamID))
	binary.BigEndian.PutUint64(n[:], uint64(index))
	m.Write(n[:])
	put(m, data)
	return m.Sum(nil)
}

// sealEvent is the stored message of the event at index of a stream.
func sealEvent(key []byte, subject, sessionID, streamID string, index int, data []byte) *nats.Msg {
	h := nats.Header{}
	h.Set(headerEventIndex, strconv.Itoa(index))
	h.Set(headerEventMAC, hex.EncodeToString(eventMAC(key, sessionID, streamID, index, data)))
	return &nats.Msg{Subject: subject, Data: data, Header: h}
}

// openEvent checks a stored message as an event of the given stream and
// returns its index.
func openEvent(key []byte, sessionID, streamID string, h nats.Header, data []byte) (int, error) {
	index, err := strconv.Atoi(h.Get(headerEventIndex))
	if err != nil || index < 0 {
		return 0, errEventMAC
	}
	got, err := hex.DecodeString(h.Get(headerEventMAC))
	if err != nil || !hmac.Equal(got, eventMAC(key, sessionID, streamID, index, data)) {
		return 0, errEventMAC
	}
	return index, nil
}
