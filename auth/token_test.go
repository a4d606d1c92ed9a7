package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestParseBearer(t *testing.T) {
	long := strings.Repeat("a", MaxTokenBytes)
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc", "abc", true},
		{"Bearer a-b.c_d~e+f/g==", "a-b.c_d~e+f/g==", true},
		{"Bearer " + long, long, true},
		{"Bearer " + long + "a", "", false},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer ==", "", false},
		{"Basic YWxpY2U6c2VjcmV0", "", false},
		{"Bearer abc def", "", false},
		{"Bearer abc\x00", "", false},
		{"Bearer ab=c", "", false},
		{"Bearerabc", "", false},
		{"Token abc", "", false},
	}
	for _, tc := range tests {
		got, err := ParseBearer(tc.header)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseBearer(%.40q) = %q, %v; want %q, ok=%v", tc.header, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("ParseBearer(%.40q): error %v is not ErrUnauthenticated", tc.header, err)
		}
	}
}

func ExampleParseBearer() {
	tok, err := ParseBearer("Bearer 5f2b9c")
	fmt.Println(tok, err)
	_, err = ParseBearer("Basic YWxpY2U6c2VjcmV0")
	fmt.Println(err)
	// Output:
	// 5f2b9c <nil>
	// unauthenticated: Authorization must be "Bearer TOKEN"
}

func selfSigned(t *testing.T) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deploy-runner"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAuthenticate(t *testing.T) {
	cert, other := selfSigned(t), selfSigned(t)
	certSum := sha256.Sum256(cert.Raw)
	a, err := New([]Caller{
		{Name: "deploy-runner", TokenSHA256: sum("runner-token"), CertSHA256: hex.EncodeToString(certSum[:]), Roles: []Role{Executor}, ActsFor: []string{"agent-7"}},
		{Name: "alice", TokenSHA256: strings.ToUpper(sum("alice-token")), Roles: []Role{Approver}},
	}, []string{"ops"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Local() {
		t.Fatal("callers configured, yet local mode")
	}
	tests := []struct {
		name   string
		header string
		certs  []*x509.Certificate
		want   string // principal name; "" = unauthenticated
	}{
		{"token", "Bearer runner-token", nil, "deploy-runner"},
		{"upper-case digest in config", "Bearer alice-token", nil, "alice"},
		{"unknown token", "Bearer guess", nil, ""},
		{"no credentials", "", nil, ""},
		{"malformed header", "Bearer", nil, ""},
		{"certificate", "", []*x509.Certificate{cert}, "deploy-runner"},
		{"unknown certificate", "", []*x509.Certificate{other}, ""},
		{"token decides over certificate", "Bearer alice-token", []*x509.Certificate{cert}, "alice"},
		{"bad token is not rescued by a certificate", "Bearer guess", []*x509.Certificate{cert}, ""},
	}
	for _, tc := range tests {
		p, err := a.Authenticate(tc.header, tc.certs)
		switch {
		case tc.want == "" && !errors.Is(err, ErrUnauthenticated):
			t.Errorf("%s: got %v, %v; want unauthenticated", tc.name, p, err)
		case tc.want != "" && (err != nil || p.Name != tc.want):
			t.Errorf("%s: got %v, %v; want %s", tc.name, p, err, tc.want)
		}
	}
	p, _ := a.Authenticate("Bearer runner-token", nil)
	if !p.MayUseAccount("ops") || p.MayUseAccount("acme") || !p.MayActFor("agent-7") || p.MayActFor("agent-9") || p.Has(Approver) {
		t.Errorf("executor principal %+v", p)
	}
	q, _ := a.Authenticate("Bearer alice-token", nil)
	if q.MayUseAccount("ops") {
		t.Error("a non-executor got the contracts' budget accounts")
	}
}

func TestLocalOperator(t *testing.T) {
	a, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate("", nil)
	if err != nil || p.Name != LocalOperator || !a.Local() {
		t.Fatalf("got %v, %v", p, err)
	}
	for _, r := range Roles {
		if !p.Has(r) {
			t.Errorf("local operator lacks %s", r)
		}
	}
	if !p.MayActFor("anyone") || !p.MayUseAccount("any") {
		t.Error("local operator is scoped")
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		c    []Caller
	}{
		{"no credential", []Caller{{Name: "a", Roles: []Role{Analyst}}}},
		{"bad digest", []Caller{{Name: "a", TokenSHA256: "abc", Roles: []Role{Analyst}}}},
		{"unknown role", []Caller{{Name: "a", TokenSHA256: sum("x"), Roles: []Role{"root"}}}},
		{"reserved name", []Caller{{Name: LocalOperator, TokenSHA256: sum("x"), Roles: []Role{Analyst}}}},
		{"shared token", []Caller{{Name: "a", TokenSHA256: sum("x"), Roles: []Role{Analyst}}, {Name: "b", TokenSHA256: sum("x"), Roles: []Role{Finance}}}},
	}
	for _, tc := range tests {
		if _, err := New(tc.c, nil); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
