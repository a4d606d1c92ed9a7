package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/server"
)

// pki issues test certificates from one CA.
type pki struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{t: t}
	p.cert, p.key = p.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "portcullis test CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.cert)
	return p
}

// issue signs tmpl with the CA (or itself when parent is nil).
func (p *pki) issue(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	p.t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return c, k
}

func (p *pki) client(name string) tls.Certificate {
	c, k := p.issue(&x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, p.cert, p.key)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k, Leaf: c}
}

// writePEM writes a certificate and its key as PEM files.
func writePEM(t *testing.T, dir, name string, c *x509.Certificate, k *ecdsa.PrivateKey) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if k != nil {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// mTLS: a client certificate signed by --client-ca and named by a caller's
// cert_sha256 is that caller; one the CA signed for nobody is
// unauthenticated; one from another CA does not get a connection; a bearer
// token works over TLS too. HTTP/2 is offered.
func TestAuthMutualTLS(t *testing.T) {
	ca := newPKI(t)
	dir := t.TempDir()
	srvCert, srvKey := ca.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "gateway"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca.cert, ca.key)
	certPath, keyPath := writePEM(t, dir, "server", srvCert, srvKey)
	caPath, _ := writePEM(t, dir, "ca", ca.cert, nil)
	analyst, stranger, approver := ca.client("analyst-1"), ca.client("stranger"), ca.client("approver-1")
	approverCert, approverKey := writePEM(t, dir, "approver", approver.Leaf, approver.PrivateKey.(*ecdsa.PrivateKey))
	approverSum := sha256.Sum256(approver.Leaf.Raw)
	rogue := newPKI(t).client("analyst-1")
	certSum := sha256.Sum256(analyst.Leaf.Raw)
	aliceSum := sha256.Sum256([]byte("alice-token"))
	cfg := testConfig + "callers:\n" +
		"  analyst-1: {cert_sha256: " + hex.EncodeToString(certSum[:]) + ", roles: [analyst]}\n" +
		"  approver-1: {cert_sha256: " + hex.EncodeToString(approverSum[:]) + ", roles: [approver]}\n" +
		"  alice: {token_sha256: " + hex.EncodeToString(aliceSum[:]) + ", roles: [approver]}\n"
	cfgPath := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: cfgPath, NatsListen: "127.0.0.1:-1", FingerprintKey: testKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLSCert: certPath, TLSKey: keyPath, ClientCA: caPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })

	clientWith := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.pool, Certificates: certs}}}
	}
	list := func(hc *http.Client, token string) error {
		req := connect.NewRequest(&pb.ListExecutionsRequest{PageSize: 1})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		_, err := svc.NewExecutionServiceClient(hc, "https://"+g.Addr).ListExecutions(context.Background(), req)
		return err
	}
	if err := list(clientWith(analyst), ""); err != nil {
		t.Fatalf("analyst's certificate: %v", err)
	}
	if err := list(clientWith(stranger), ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("a CA-signed certificate of no caller: %v", err)
	}
	if err := list(clientWith(rogue), ""); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	if err := list(clientWith(), ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no certificate, no token: %v", err)
	}
	if err := list(clientWith(), "alice-token"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("alice (approver) lists executions: %v", err)
	}
	ap := svc.NewApprovalServiceClient(clientWith(), "https://"+g.Addr)
	req := connect.NewRequest(&pb.ListPendingRequest{})
	req.Header().Set("Authorization", "Bearer alice-token")
	if _, err := ap.ListPending(context.Background(), req); err != nil {
		t.Fatalf("alice's token over TLS: %v", err)
	}
	// The CLI over TLS: with the approver's certificate, and with a token.
	for _, flags := range [][]string{{"--client-cert", approverCert, "--client-key", approverKey}, {"--token", "alice-token"}} {
		out, err := exec.Command(binary, append([]string{"approvals", "list", "--addr", "https://" + g.Addr, "--ca", caPath}, flags...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nothing waits for approval") {
			t.Fatalf("approvals list over TLS %v: %v\n%s", flags[0], err, out)
		}
	}
	out, err := exec.Command(binary, "approvals", "list", "--addr", "https://"+g.Addr, "--ca", caPath).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unauthenticated") {
		t.Fatalf("approvals list over TLS without credentials: %v\n%s", err, out)
	}
	hreq, _ := http.NewRequest(http.MethodPost, "https://"+g.Addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
	hreq.Header.Set("Content-Type", "application/json")
	res, err := clientWith().Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Fatalf("health over TLS: %d %s", res.StatusCode, res.Proto)
	}
}
