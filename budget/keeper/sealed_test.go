package keeper

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// enrolled is a ledger.Keys of fixed enrollments (what trust.Keyring
// answers from the meta stream).
type enrolled map[string][]ed25519.PublicKey

func (e enrolled) GatewayKeys(id string) ([]ed25519.PublicKey, error) { return e[id], nil }

// sealedPair is two keepers of one ledger, gw-a and gw-b, each with its
// enrolled key, and a third key nobody enrolled.
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
		k.Lead(nil, nil, keys)
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
		t.Fatalf("an enrolled gateway's forward: %v", err)
	}
	if s.From != "gw-a" || string(s.Body) != string(body) {
		t.Fatalf("opened %+v", s)
	}
	ans := b.seal("gw-a", []byte(`{"outcome":"released"}`), hashOf(req))
	if _, err := a.open(ans, "gw-b", hashOf(req)); err != nil {
		t.Fatalf("the leader's answer: %v", err)
	}

	// What a client with the gateway user's NATS credentials but no
	// enrolled key can send instead.
	forged := func(edit func(s *sealed), key ed25519.PrivateKey) []byte {
		var s sealed
		if err := json.Unmarshal(req, &s); err != nil {
			t.Fatal(err)
		}
		edit(&s)
		if key != nil {
			s.Sig = ed25519.Sign(key, s.digest())
		}
		out, _ := json.Marshal(&s)
		return out
	}
	for name, data := range map[string][]byte{
		"the old unsigned command":     body,
		"no signature":                 forged(func(s *sealed) { s.Sig = nil }, nil),
		"signed by a key not enrolled": forged(func(s *sealed) {}, rogue),
		"claims an enrolled sender": forged(func(s *sealed) {
			s.From = "gw-a"
			s.Body = []byte(`{"op":"release","account":"team-a","op_key":"op-2"}`)
		}, rogue),
		"body changed after signing":     forged(func(s *sealed) { s.Body = []byte(`{"op":"release","account":"team-a","op_key":"op-2"}`) }, nil),
		"for another gateway":            forged(func(s *sealed) { s.To = "gw-c" }, a.SignKey),
		"sent long ago (a stale replay)": forged(func(s *sealed) { s.At = time.Now().Add(-time.Hour).UnixNano() }, a.SignKey),
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

func TestRefusedForwardIsDecidedByTheSender(t *testing.T) {
	a, b, _ := sealedPair(t, nil)
	// gw-b cannot verify gw-a (say its keyring lost gw-a): it refuses,
	// signed, and gw-a reads the refusal as "decide it yourself".
	b.Lead(nil, nil, enrolled{"gw-b": b.keys.(enrolled)["gw-b"]})
	req := a.seal("gw-b", []byte(`{"op":"release","account":"team-a","op_key":"op-1"}`), "")
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

// Anything a NATS client sends a leading gateway either opens as an
// enrolled gateway's forward or is refused; none of it panics.
func FuzzOpenSealed(f *testing.F) {
	a, b, rogue := sealedPair(f, nil)
	f.Add(a.seal("gw-b", []byte(`{"op":"reserve"}`), ""))
	f.Add(a.seal("gw-b", []byte(`{}`), "00"))
	f.Add([]byte(`{"from":"gw-a","to":"gw-b","at":1,"body":{},"sig":"AAAA"}`))
	f.Add([]byte(`{"op":"release","account":"team-a","op_key":"op-1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := b.open(data, "", "")
		if err != nil {
			return
		}
		// It opened: so an enrolled key signed exactly this.
		if s.From != "gw-a" || s.To != "gw-b" || !ed25519.Verify(a.SignKey.Public().(ed25519.PublicKey), s.digest(), s.Sig) {
			t.Fatalf("opened %+v", s)
		}
		if ed25519.Verify(rogue.Public().(ed25519.PublicKey), s.digest(), s.Sig) {
			t.Fatal("a rogue signature opened")
		}
	})
}
