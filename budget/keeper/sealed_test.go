package keeper

import (
	"crypto/ed25519"
	"crypto/hmac"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// enrolled is a ledger.Keys of fixed enrollments (what trust.Keyring
// answers from the meta stream).
type enrolled map[string][]ed25519.PublicKey

func (e enrolled) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return e[id], nil }

// forwardKey is the ledger's forward key in these tests.
var forwardKey = ForwardKey([]byte("0123456789abcdef0123456789abcdef"))

// sealedPair is two keepers of one ledger, gw-a and gw-b, each with its
// enrolled key and the ledger's forward key, and a third key nobody
// enrolled.
func sealedPair(t testing.TB, now func() time.Time) (a, b *Keeper, rogue ed25519.PrivateKey) {
	t.Helper()
	keys := enrolled{}
	mk := func(id string) *Keeper {
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = []ed25519.PublicKey{pub}
		k := New(nil, nil, id, now)
		k.SignKey = priv
		k.Lead(nil, nil, keys, forwardKey)
		return k
	}
	a, b = mk("gw-a"), mk("gw-b")
	_, rogue, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, rogue
}

func TestSealedForwardAndAnswer(t *testing.T) {
	a, b, rogue := sealedPair(t, nil)
	body := []byte(`{"op":"release","account":"team-a","op_key":"op-1"}`)
	req := a.seal("gw-b", body, "")
	s, err := b.open(req, "", "")
	if err != nil {
		t.Fatalf("a gateway's forward: %v", err)
	}
	if s.From != "gw-a" || string(s.Body) != string(body) {
		t.Fatalf("opened %+v", s)
	}
	ans := b.seal("gw-a", []byte(`{"outcome":"released"}`), hashOf(req))
	if _, err := a.open(ans, "gw-b", hashOf(req)); err != nil {
		t.Fatalf("the leader's answer: %v", err)
	}

	// What a client with the gateway user's NATS credentials but none of
	// the ledger's keys can send instead.
	forged := func(edit func(s *sealed), key []byte) []byte {
		var s sealed
		if err := json.Unmarshal(req, &s); err != nil {
			t.Fatal(err)
		}
		edit(&s)
		if key != nil {
			s.MAC = macOf(key, s.digest())
		}
		out, _ := json.Marshal(&s)
		return out
	}
	otherKey := ForwardKey([]byte("another ledger's fingerprint key"))
	changed := []byte(`{"op":"release","account":"team-a","op_key":"op-2"}`)
	for name, data := range map[string][]byte{
		"the old unsigned command":       body,
		"no MAC":                         forged(func(s *sealed) { s.MAC = nil }, nil),
		"a MAC under another key":        forged(func(s *sealed) {}, otherKey),
		"a rogue Ed25519 signature":      forged(func(s *sealed) { s.MAC = ed25519.Sign(rogue, s.digest()) }, nil),
		"body changed after the MAC":     forged(func(s *sealed) { s.Body = changed }, nil),
		"for another gateway":            forged(func(s *sealed) { s.To = "gw-c" }, forwardKey),
		"sent long ago (a stale replay)": forged(func(s *sealed) { s.At = time.Now().Add(-time.Hour).UnixNano() }, forwardKey),
		"an answer posing as a forward":  ans,
		"not JSON":                       []byte("\x00garbage"),
	} {
		if _, err := b.open(data, "", ""); err == nil {
			t.Errorf("%s: opened", name)
		}
	}

	// An answer is the leader's, to this very forward.
	other := a.seal("gw-b", []byte(`{"op":"settle"}`), "")
	for name, data := range map[string][]byte{
		"an answer to another forward":   b.seal("gw-a", []byte(`{}`), hashOf(other)),
		"an answer from another gateway": a.seal("gw-a", []byte(`{}`), hashOf(req)),
		"a forward posing as an answer":  b.seal("gw-a", []byte(`{}`), ""),
	} {
		if _, err := a.open(data, "gw-b", hashOf(req)); err == nil {
			t.Errorf("%s: believed", name)
		}
	}
}

func TestSealedClockSkew(t *testing.T) {
	var ahead time.Duration
	a, b, _ := sealedPair(t, func() time.Time { return time.Now().Add(ahead) })
	req := a.seal("gw-b", []byte(`{}`), "")
	ahead = forwardSkewMax + time.Second // gw-b reads it with its clock this far ahead
	if _, err := b.open(req, "", ""); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("a forward from beyond the clock skew: %v", err)
	}
}

func TestLeaseSignature(t *testing.T) {
	a, b, rogue := sealedPair(t, nil)
	l := a.signLease("team-a", Lease{Gateway: "gw-a", Expires: time.Now().Add(LeaseTTL)})
	if !b.leaseValid("team-a", l) {
		t.Fatal("gw-a's own lease is not valid")
	}
	data, _ := json.Marshal(l)
	var back Lease
	if err := json.Unmarshal(data, &back); err != nil || !b.leaseValid("team-a", back) {
		t.Fatalf("lease through JSON: %v, valid %v", err, b.leaseValid("team-a", back))
	}
	for name, f := range map[string]Lease{
		"unsigned":                {Gateway: "gw-a", Expires: l.Expires},
		"for another account":     l,
		"longer than signed":      {Gateway: "gw-a", Expires: l.Expires.Add(time.Hour), Sig: l.Sig},
		"names gw-b, signed by a": {Gateway: "gw-b", Expires: l.Expires, Sig: l.Sig},
		"a rogue key's":           {Gateway: "gw-a", Expires: l.Expires, Sig: ed25519.Sign(rogue, leaseDigest("team-a", Lease{Gateway: "gw-a", Expires: l.Expires}))},
		"nobody's":                {},
	} {
		account := "team-a"
		if name == "for another account" {
			account = "team-b"
		}
		if b.leaseValid(account, f) {
			t.Errorf("%s lease is valid", name)
		}
	}
}

func TestForwardWithoutTheKeyIsRefused(t *testing.T) {
	a, b, _ := sealedPair(t, nil)
	// A forward under gw-a's name without the ledger's key: gw-b refuses
	// it, decides nothing, and answers its claimed sender with a refusal
	// that the sender reads as "decide it yourself".
	impostor := New(nil, nil, "gw-a", nil)
	impostor.Lead(nil, nil, nil, ForwardKey([]byte("not the ledger's key")))
	req := impostor.seal("gw-b", []byte(`{"op":"release","account":"team-a","op_key":"op-1"}`), "")
	ans := b.ServeForward(t.Context(), req)
	s, err := a.open(ans, "gw-b", hashOf(req))
	if err != nil {
		t.Fatalf("the refusal: %v", err)
	}
	var rp reply
	if err := json.Unmarshal(s.Body, &rp); err != nil || rp.Code != codeOf(errForwardRefused) {
		t.Fatalf("refusal %s (%v), want code %d", s.Body, err, codeOf(errForwardRefused))
	}
}

// Anything a NATS client sends a leading gateway either opens as a
// forward under the ledger's forward key or is refused; none of it panics.
func FuzzOpenSealed(f *testing.F) {
	a, b, _ := sealedPair(f, nil)
	f.Add(a.seal("gw-b", []byte(`{"op":"reserve"}`), ""))
	f.Add(a.seal("gw-b", []byte(`{}`), "00"))
	f.Add([]byte(`{"from":"gw-a","to":"gw-b","at":1,"body":{},"mac":"AAAA"}`))
	f.Add([]byte(`{"op":"release","account":"team-a","op_key":"op-1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := b.open(data, "", "")
		if err != nil {
			return
		}
		// It opened: so the ledger's forward key authenticated exactly this.
		if s.To != "gw-b" || !hmac.Equal(s.MAC, macOf(forwardKey, s.digest())) {
			t.Fatalf("opened %+v", s)
		}
	})
}
