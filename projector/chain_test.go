package projector

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// specChain is Chain as its comment defines it, hashed in three writes.
func specChain(prev []byte, seq uint64, data []byte) []byte {
	if prev == nil {
		prev = make([]byte, sha256.Size)
	}
	h := sha256.Sum256(data)
	m := sha256.New()
	m.Write(prev)
	m.Write(binary.BigEndian.AppendUint64(nil, seq))
	m.Write(h[:])
	return m.Sum(nil)
}

// Chain gives the digest its definition gives, with one allocation.
func TestChainIsItsDefinition(t *testing.T) {
	var d, o []byte
	for i := range 100 {
		data := bytes.Repeat([]byte{byte(i)}, i*7)
		d, o = Chain(d, uint64(i)<<40|uint64(i), data), specChain(o, uint64(i)<<40|uint64(i), data)
		if !bytes.Equal(d, o) {
			t.Fatal(i)
		}
	}
	if !bytes.Equal(Chain([]byte("short"), 3, nil), specChain([]byte("short"), 3, nil)) {
		t.Fatal("short prev")
	}
	if testing.AllocsPerRun(100, func() { Chain(d, 1, d) }) > 1 {
		t.Fatal("allocs")
	}
}
