package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Seal links ev to the previous event on its subject and sets its own hash:
// SHA-256 over the deterministic encoding of the envelope with hash,
// signature and group signature fields cleared.
func Seal(ev *pb.Event, prevHash []byte) {
	ev.PrevHash = prevHash
	ev.Hash = nil
	clearSignature(ev)
	ev.Hash = eventHash(ev, nil)
}

// SealEncoded is Seal that also returns the sealed event's encoding (what
// proto.Marshal gives for ev as it is now: hash set, no signature), from
// the one marshal that hashed it: the hash field is spliced into the
// hashed encoding at its place in field order. The log stores it as it is
// (Message.Data), so a decision marshals its event once.
func SealEncoded(ev *pb.Event, prevHash []byte) []byte {
	ev.PrevHash = prevHash
	ev.Hash = nil
	clearSignature(ev)
	var out []byte
	ev.Hash = eventHash(ev, func(b, hash []byte) { out = spliceHash(b, hash) })
	return out
}

// hashBufs holds the buffers eventHash marshals into: a
// busy account's budget events run to kilobytes each, hashed when sealed
// and again by every projector that checks them.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxPooledHashBuf = 64 << 10

// hashField is the Event's hash field; fields hashField to groupSizeField
// are outside the hash.
const (
	hashField      = 8  // bytes, as are signature (9) and group_path (10)
	groupPathField = 10 // group_index (11) and group_size (12) are varints
	groupSizeField = 12
)

// groupFieldsRoom is spare capacity for the group signature fields the
// committer appends (signature, a path of a few nodes, index, size).
const groupFieldsRoom = 2 + ed25519.SignatureSize + 8*(2+sha256.Size) + 12

// spliceHash inserts the hash field into b (an encoding without it, fields
// in number order as proto.Marshal writes them) before the first field
// numbered above it.
func spliceHash(b, hash []byte) []byte {
	at := len(b)
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			break
		}
		if num > hashField {
			at = off
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			break
		}
		off += n + m
	}
	out := make([]byte, 0, len(b)+2+len(hash)+groupFieldsRoom)
	out = append(out, b[:at]...)
	out = protowire.AppendTag(out, hashField, protowire.BytesType)
	out = protowire.AppendBytes(out, hash)
	return append(out, b[at:]...)
}

// hashedSum is the SHA-256 of data (a stored event's encoding) without its
// hash, signature and group fields (8 to 12): for an event encoded as
// proto.Marshal writes it, exactly the encoding its hash was computed
// over. false when data does not parse, or holds one of those fields with
// another wire type (the decoder keeps such a field as an unknown field,
// which CheckHash's re-marshal hashes, so that check must decide).
func hashedSum(data []byte) ([sha256.Size]byte, bool) {
	var sum [sha256.Size]byte
	h := sha256.New()
	kept := 0 // data[kept:off] is hashed but not yet written
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 {
			return sum, false
		}
		m := protowire.ConsumeFieldValue(num, typ, data[off+n:])
		if m < 0 {
			return sum, false
		}
		if num >= hashField && num <= groupSizeField {
			want := protowire.BytesType
			if num > groupPathField {
				want = protowire.VarintType
			}
			if typ != want {
				return sum, false
			}
			h.Write(data[kept:off])
			kept = off + n + m
		}
		off += n + m
	}
	h.Write(data[kept:])
	h.Sum(sum[:0])
	return sum, true
}

// AppendUnsigned appends data (a stored event's encoding) to dst without
// the fields outside its hash that the signature adds (signature,
// group_path, group_index, group_size): what the views keep of a head
// whose signature the projector already checked. The hash stays.
func AppendUnsigned(dst, data []byte) ([]byte, error) {
	for b := data; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: stored event: %v", ErrCorrupt, protowire.ParseError(n))
		}
		if num <= hashField || num > groupSizeField {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst, nil
}

// checkHashEncoded is CheckHash for an event decoded from data: when the
// hash is that of data's own bytes without fields 8 to 12 (the writer
// hashed the encoding it stored, so data holds that very encoding and ev,
// decoded from it, is what was hashed) no re-marshal is needed; otherwise
// (another encoder's field order, say) it re-marshals as CheckHash does.
func checkHashEncoded(ev *pb.Event, data []byte) error {
	if data != nil && len(ev.GetHash()) == sha256.Size {
		if sum, ok := hashedSum(data); ok && bytes.Equal(sum[:], ev.GetHash()) {
			return nil
		}
	}
	return CheckHash(ev)
}

// Unsign clears, in place, the fields outside ev's hash that the
// signature adds, which leaves ev as AppendUnsigned leaves its encoding.
// It writes only fields that are set, so it may be called on an event
// that is already unsigned and shared.
func Unsign(ev *pb.Event) {
	if ev.Signature != nil || ev.GroupPath != nil || ev.GroupIndex != 0 || ev.GroupSize != 0 {
		clearSignature(ev)
	}
}

func clearSignature(ev *pb.Event) {
	ev.Signature, ev.GroupPath, ev.GroupIndex, ev.GroupSize = nil, nil, 0, 0
}

// CheckHash verifies that ev's hash matches its content.
func CheckHash(ev *pb.Event) error {
	want := ev.GetHash()
	sig, path, idx, size := ev.GetSignature(), ev.GetGroupPath(), ev.GetGroupIndex(), ev.GetGroupSize()
	ev.Hash = nil
	clearSignature(ev)
	got := eventHash(ev, nil)
	ev.Hash, ev.Signature, ev.GroupPath, ev.GroupIndex, ev.GroupSize = want, sig, path, idx, size
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w: event %s on %s: hash mismatch", ErrCorrupt, ev.GetEventId(), ev.GetSubject())
	}
	return nil
}

// eventHash is the SHA-256 of ev's deterministic encoding, marshalled into
// a pooled buffer; use, when not nil, sees that encoding and the hash
// (the buffer is reused after it returns).
func eventHash(ev *pb.Event, use func(b, hash []byte)) []byte {
	buf := hashBufs.Get().(*[]byte)
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend((*buf)[:0], ev)
	if err != nil {
		panic(fmt.Sprintf("marshal event for hashing: %v", err)) // only fails on invalid UTF-8, which Validate rejects first
	}
	sum := sha256.Sum256(b)
	if use != nil {
		use(b, sum[:])
	}
	if cap(b) <= maxPooledHashBuf {
		*buf = b
		hashBufs.Put(buf)
	}
	return sum[:]
}

// Sign signs a sealed event's hash with the writing gateway's key; the
// ledger records each gateway's public key when it starts, so a verifier
// can tell who wrote every event and that nobody else re-signed it.
func Sign(ev *pb.Event, key ed25519.PrivateKey) {
	if key != nil {
		clearSignature(ev) // a signature of its own replaces a group's
		ev.Signature = ed25519.Sign(key, ev.GetHash())
		verified.remember(ev.GetHash(), ev.Signature, key.Public().(ed25519.PublicKey))
	}
}

// SignEvent is Sign with p's nonces made ahead (see Presigner).
func (p *Presigner) SignEvent(ev *pb.Event) {
	clearSignature(ev)
	ev.Signature = p.Sign(ev.GetHash())
	verified.remember(ev.GetHash(), ev.Signature, p.pub)
}

// groupLabel separates a group signature's message from an event hash.
const groupLabel = "portcullis event group v1\x00"

// MaxGroupSize bounds the events one group signature covers.
const MaxGroupSize = 1 << 16

// GroupSignature is one signature over a commit group's event hashes and,
// per event, its place in the group's Merkle tree.
type GroupSignature struct {
	Signature []byte
	Paths     [][][]byte // Paths[i]: event i's audit path
}

// SignGroup signs the Merkle root of hashes (sealed events' hashes, in
// the order they are sent) once: each event then verifies by itself with
// its path (see the Event message). The signature is remembered, so this
// process's own reads of the group cost no verify.
func SignGroup(key ed25519.PrivateKey, hashes [][]byte) GroupSignature {
	return signGroup(hashes, key.Public().(ed25519.PublicKey), func(msg []byte) []byte { return ed25519.Sign(key, msg) })
}

// SignGroup is ledger.SignGroup with p's nonces made ahead: the same
// signature to every verifier, at a fraction of the cost on the caller's
// path.
func (p *Presigner) SignGroup(hashes [][]byte) GroupSignature {
	return signGroup(hashes, p.pub, p.Sign)
}

func signGroup(hashes [][]byte, pub ed25519.PublicKey, sign func(msg []byte) []byte) GroupSignature {
	if len(hashes) == 0 || len(hashes) > MaxGroupSize {
		panic(fmt.Sprintf("ledger: a signature group has 1 to %d events, got %d", MaxGroupSize, len(hashes)))
	}
	leaves := make([][]byte, len(hashes))
	for i, h := range hashes {
		leaves[i] = leafHash(h)
	}
	gs := GroupSignature{Paths: make([][][]byte, len(hashes))}
	root := merkle(leaves, 0, gs.Paths)
	msg := groupMessage(uint64(len(hashes)), root)
	gs.Signature = sign(msg)
	verified.remember(msg, gs.Signature, pub)
	return gs
}

// AppendGroupSignature appends event i's group signature fields to its
// encoding (fields the encoding does not hold yet: a parser reads them as
// if they had been marshalled with the event).
func AppendGroupSignature(data []byte, gs GroupSignature, i int) []byte {
	data = protowire.AppendTag(data, 9, protowire.BytesType)
	data = protowire.AppendBytes(data, gs.Signature)
	for _, p := range gs.Paths[i] {
		data = protowire.AppendTag(data, 10, protowire.BytesType)
		data = protowire.AppendBytes(data, p)
	}
	if i > 0 {
		data = protowire.AppendTag(data, 11, protowire.VarintType)
		data = protowire.AppendVarint(data, uint64(i))
	}
	data = protowire.AppendTag(data, 12, protowire.VarintType)
	return protowire.AppendVarint(data, uint64(len(gs.Paths)))
}

func leafHash(h []byte) []byte {
	m := sha256.New()
	m.Write([]byte{0})
	m.Write(h)
	return m.Sum(nil)
}

func nodeHash(l, r []byte) []byte {
	m := sha256.New()
	m.Write([]byte{1})
	m.Write(l)
	m.Write(r)
	return m.Sum(nil)
}

// groupMessage is what a group signature signs: the label, the group's
// size (8 bytes, big-endian) and its root.
func groupMessage(size uint64, root []byte) []byte {
	return append(binary.BigEndian.AppendUint64([]byte(groupLabel), size), root...)
}

// merkle returns the RFC 9162 tree hash of leaves and appends to
// paths[off+i] each leaf's sibling at this level and above.
func merkle(leaves [][]byte, off int, paths [][][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1) // largest power of two < n
	l := merkle(leaves[:k], off, paths)
	r := merkle(leaves[k:], off+k, paths)
	for i := range k {
		paths[off+i] = append(paths[off+i], r)
	}
	for i := k; i < len(leaves); i++ {
		paths[off+i] = append(paths[off+i], l)
	}
	return nodeHash(l, r)
}

// groupRoot recomputes the root from an event's hash and audit path
// (RFC 9162, 2.1.3.2); false when the path does not fit index and size.
func groupRoot(hash []byte, path [][]byte, index, size uint64) ([]byte, bool) {
	if index >= size || size > MaxGroupSize {
		return nil, false
	}
	fn, sn := index, size-1
	r := leafHash(hash)
	for _, p := range path {
		if sn == 0 || len(p) != sha256.Size {
			return nil, false
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return r, sn == 0
}

// signedMessage is what ev's signature signs: its hash, or its group's
// root when it carries a group signature (nil: the path does not fit).
func signedMessage(ev *pb.Event) []byte {
	if ev.GetGroupSize() == 0 {
		if len(ev.GetGroupPath()) > 0 || ev.GetGroupIndex() != 0 {
			return nil
		}
		return ev.GetHash()
	}
	root, ok := groupRoot(ev.GetHash(), ev.GetGroupPath(), uint64(ev.GetGroupIndex()), uint64(ev.GetGroupSize()))
	if !ok {
		return nil
	}
	return groupMessage(uint64(ev.GetGroupSize()), root)
}

// verifiedMax bounds how many verified signatures this process remembers.
const verifiedMax = 1 << 16

// verifiedSignatures remembers signatures this process made or verified
// (message and signature → the key it verifies with), so checking an
// event again (a gateway folds its own writes, reads the head it folded,
// folds another gateway's group of 64) costs a map lookup instead of an
// Ed25519 verify. The verdict is the one a verify would give: the same
// signature bytes, by a key enrolled now, over the same message.
type verifiedSignatures struct {
	mu sync.Mutex
	m  map[string]ed25519.PublicKey
}

var verified = &verifiedSignatures{m: make(map[string]ed25519.PublicKey)}

func verifiedKey(msg, sig []byte) string { return string(msg) + string(sig) }

func (o *verifiedSignatures) remember(msg, sig []byte, pub ed25519.PublicKey) {
	o.mu.Lock()
	if len(o.m) >= verifiedMax {
		clear(o.m) // simplest bound; a miss costs one verify
	}
	o.m[verifiedKey(msg, sig)] = pub
	o.mu.Unlock()
}

func (o *verifiedSignatures) made(msg, sig []byte, pubs []ed25519.PublicKey) bool {
	o.mu.Lock()
	p, ok := o.m[verifiedKey(msg, sig)]
	o.mu.Unlock()
	if !ok {
		return false
	}
	for _, pub := range pubs {
		if bytes.Equal(p, pub) {
			return true
		}
	}
	return false
}

// ForgetOwnSignatures empties the memory of signatures this process made
// or verified (benchmarks measure the verify every foreign event costs).
func ForgetOwnSignatures() {
	verified.mu.Lock()
	clear(verified.m)
	verified.mu.Unlock()
}

// CheckSignature verifies ev's signature (on its own or its group's) with
// its writer's public key. It always runs the Ed25519 verify (offline
// audits check every event).
func CheckSignature(ev *pb.Event, pub ed25519.PublicKey) error {
	msg := signedMessage(ev)
	if msg == nil || len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, msg, ev.GetSignature()) {
		return fmt.Errorf("%w: %w: event %s on %s: signature does not verify with gateway %s's key", ErrCorrupt, ErrBadSignature, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
	}
	return nil
}

// Keys answers which public keys a gateway id is enrolled with (none: not
// enrolled). trust.Keyring implements it from the root-signed enrollment
// records of the meta stream.
// An error means the keys could not be read now (the meta stream was not
// reachable): the caller retries, it never quarantines on it.
type Keys interface {
	GatewayKeys(gatewayID string) ([]ed25519.PublicKey, error)
}

// CheckSigned asserts that a stored event is what an enrolled gateway
// wrote: its hash matches its content and its signature (its own, or its
// commit group's through its Merkle path) verifies with one of its
// writer's enrolled keys. Nil keys check the hash only (offline tools that
// have no keyring). An event that fails is quarantined, never folded or
// served.
func CheckSigned(ev *pb.Event, keys Keys) error {
	return CheckSignedData(ev, nil, keys)
}

// CheckSignedData is CheckSigned for ev decoded from data, its stored
// encoding: the hash is checked against data's bytes when they are the
// encoding that was hashed, which spares a re-marshal. data must be the
// very bytes ev was decoded from, ev unchanged since (else pass nil).
func CheckSignedData(ev *pb.Event, data []byte, keys Keys) error {
	if err := checkHashEncoded(ev, data); err != nil {
		return err
	}
	if keys == nil {
		return nil
	}
	pubs, err := keys.GatewayKeys(ev.GetGatewayId())
	if err != nil {
		return fmt.Errorf("%w: gateway %s: %v", ErrKeysUnavailable, ev.GetGatewayId(), err)
	}
	if len(pubs) == 0 {
		return fmt.Errorf("%w: event %s on %s: writer %q is not an enrolled gateway", ErrUnenrolled, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
	}
	msg := signedMessage(ev)
	if msg == nil {
		return fmt.Errorf("%w: %w: event %s on %s: its group signature's path does not fit its place in the group", ErrCorrupt, ErrBadSignature, ev.GetEventId(), ev.GetSubject())
	}
	if verified.made(msg, ev.GetSignature(), pubs) {
		return nil
	}
	for _, pub := range pubs {
		if len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, ev.GetSignature()) {
			verified.remember(msg, ev.GetSignature(), pub)
			return nil
		}
	}
	return fmt.Errorf("%w: %w: event %s on %s: signature does not verify with gateway %s's enrolled key", ErrCorrupt, ErrBadSignature, ev.GetEventId(), ev.GetSubject(), ev.GetGatewayId())
}
