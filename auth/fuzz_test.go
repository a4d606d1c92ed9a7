package auth

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseBearer: any header either yields a token that is within the
// limits, of b64token characters, and parses back to itself, or is refused
// as unauthenticated; nothing panics.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  a-b.c_d~e+f/g==", "Bearer", "Basic YWxpY2U6c2VjcmV0", "Bearer ==", "Bearer a b", "Bearer \xff", ""} {
		f.Add(s)
	}
	a, err := New([]Caller{{Name: "alice", TokenSHA256: sum("alice-token"), Roles: []Role{Approver}}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := ParseBearer(header)
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) || tok != "" {
				t.Fatalf("refusal %q, %v", tok, err)
			}
		} else {
			if tok == "" || len(tok) > MaxTokenBytes || strings.ContainsAny(tok, " \t\r\n\x00") {
				t.Fatalf("accepted token %q", tok)
			}
			again, err := ParseBearer("Bearer " + tok)
			if err != nil || again != tok {
				t.Fatalf("round trip of %q: %q, %v", tok, again, err)
			}
		}
		p, err := a.Authenticate(header, nil)
		if (err == nil) != (tok == "alice-token") || (err == nil && p.Name != "alice") {
			t.Fatalf("Authenticate(%q) = %v, %v", header, p, err)
		}
	})
}
