package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/server"
)

// tlsFiles makes a CA and, signed by it, a server certificate for
// 127.0.0.1 and a client certificate, as PEM files in dir.
func tlsFiles(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string, pool *x509.CertPool) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kb)
	}
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return write("ca.pem", "CERTIFICATE", caDER), srvCert, srvKey, cliCert, cliKey, pool
}

// A gateway joins a NATS that requires TLS with client certificates and
// nkeys: with --nats-tls-ca/--nats-tls-cert/--nats-tls-key it starts;
// without the client certificate it fails naming the URL.
func TestGatewayOverNATSWithTLS(t *testing.T) {
	dir := t.TempDir()
	ca, srvCert, srvKey, cliCert, cliKey, pool := tlsFiles(t, dir)
	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	creds := t.TempDir()
	if err := natsauth.EnsureFiles(creds); err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.Users(creds, natstest.TestStreams)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, SyncAlways: true, Nkeys: users,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		TLSVerify: true, TLSTimeout: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	url := "tls://" + ns.Addr().String()
	o := server.Options{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: url,
		NatsCreds: natsauth.Path(creds, natsauth.Admin), NatsTLSCA: ca, FingerprintKey: testKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if _, err := server.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "nats "+url) {
		t.Fatalf("joined without a client certificate: %v", err)
	}
	o.NatsTLSCert, o.NatsTLSKey = cliCert, cliKey
	g, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("with TLS flags: %v", err)
	}
	defer g.Close(context.Background())
	if _, err := client(g).Begin(context.Background(), beginReq("create_payment", args(t, map[string]any{"tls": true}), "op-tls", "1")); err != nil {
		t.Fatal(err)
	}
}
