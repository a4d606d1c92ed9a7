package budget

import (
	"encoding/json"
	"testing"
	"time"
	"unicode"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"
)

// The digest is pinned: changing the canonical form changes every
// limit_digest already recorded.
func TestLimitDigestGolden(t *testing.T) {
	l := Limit{Account: "acct-1", Currency: "GBP", Limit: 50_000, ValidFrom: time.Date(2025, 10, 27, 10, 0, 0, 0, time.FixedZone("CET", 3600)), Delegator: "finance@example.org"}
	want := `{"account":"acct-1","currency":"GBP","delegator":"finance@example.org","limit":50000,"valid_from":"2025-10-27T09:00:00Z","valid_until":""}`
	if got := string(l.Canonical()); got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	if got, want := l.Digest(), "sha256:c855de7ed612f23d11d60905d8b38525a8a31af3beb4a6bfb7716d1c156c6c4a"; got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}

// Canonical is RFC 8785: for any valid record it equals what a JCS
// implementation makes of the same object, and the digest changes with
// every field.
func TestLimitCanonicalIsJCS(t *testing.T) {
	genTime := rapid.Custom(func(t *rapid.T) time.Time {
		if rapid.Bool().Draw(t, "open") {
			return time.Time{}
		}
		sec := rapid.Int64Range(-62135596800+86400, 253402300799-86400).Draw(t, "sec")
		nsec := rapid.SampledFrom([]int64{0, 1, 500_000_000, 123_456_789}).Draw(t, "nsec")
		zone := time.FixedZone("z", rapid.IntRange(-12, 12).Draw(t, "zone")*3600)
		return time.Unix(sec, nsec).In(zone)
	})
	genIdent := rapid.StringOfN(rapid.OneOf(rapid.RuneFrom(nil, unicodeNonControl...), rapid.SampledFrom([]rune{'"', '\\', '/', 'é', '€', 0x2028, 0x1F600})), 1, 20, MaxKeyBytes)
	rapid.Check(t, func(t *rapid.T) {
		l := Limit{
			Account:    genIdent.Draw(t, "account"),
			Currency:   rapid.SampledFrom([]string{"GBP", "EUR", "USD"}).Draw(t, "currency"),
			Limit:      rapid.Int64Range(0, MaxAmount).Draw(t, "limit"),
			ValidFrom:  genTime.Draw(t, "from"),
			ValidUntil: genTime.Draw(t, "until"),
			Delegator:  genIdent.Draw(t, "delegator"),
		}
		obj := map[string]any{
			"account": l.Account, "currency": l.Currency, "delegator": l.Delegator, "limit": l.Limit,
			"valid_from": canonicalTime(l.ValidFrom), "valid_until": canonicalTime(l.ValidUntil),
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Canonical(); string(got) != string(want) {
			t.Fatalf("canonical\n got %s\nwant %s", got, want)
		}
		m := l
		m.Limit ^= 1
		if m.Digest() == l.Digest() {
			t.Fatal("digest ignores the limit")
		}
	})
}

var unicodeNonControl = []*unicode.RangeTable{unicode.L, unicode.N, unicode.P, unicode.S, unicode.Zs}
