package mongotest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, generated for a test.
type testPKI struct {
	caPool     *x509.CertPool
	caFile     string // the CA certificate, PEM
	server     tls.Certificate
	clientFile string // the client certificate and key, PEM
	clientSubj string // the client certificate's subject, RFC 2253
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mongotest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
		key := newKey()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return key, der
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pemOf("PRIVATE KEY", der)
	}

	p := &testPKI{caPool: x509.NewCertPool(), caFile: filepath.Join(dir, "ca.pem"), clientFile: filepath.Join(dir, "client.pem")}
	p.caPool.AddCert(ca)
	if err := os.WriteFile(p.caFile, pemOf("CERTIFICATE", caDER), 0o600); err != nil {
		t.Fatal(err)
	}

	srvKey, srvDER := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if p.server, err = tls.X509KeyPair(pemOf("CERTIFICATE", srvDER), keyPEM(srvKey)); err != nil {
		t.Fatal(err)
	}

	subject := pkix.Name{CommonName: "client", OrganizationalUnit: []string{"Drivers"}, Organization: []string{"MongoDB"}, Country: []string{"IS"}}
	cliKey, cliDER := issue(3, &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	cli, _ := x509.ParseCertificate(cliDER)
	p.clientSubj = cli.Subject.String()
	if err := os.WriteFile(p.clientFile, append(pemOf("CERTIFICATE", cliDER), keyPEM(cliKey)...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverTLS is the server's tls.Config: its certificate, and client
// certificates verified when given.
func (p *testPKI) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.caPool,
		MinVersion:   tls.VersionTLS12,
	}
}

// TestDriverTLS connects the official driver over TLS, verifying the
// server's certificate with the test's CA.
func TestDriverTLS(t *testing.T) {
	pki := newPKI(t)
	srv := start(t, mongotest.WithTLS(pki.serverTLS()))
	client := connect(t, srv.URI()+"?tls=true&tlsCAFile="+url.QueryEscape(pki.caFile))
	c := ctx(t)
	if err := client.Ping(c, nil); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}
	coll := client.Database("x").Collection("c")
	if _, err := coll.InsertOne(c, bson.D{{Key: "tls", Value: true}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	if err := coll.FindOne(c, bson.D{{Key: "tls", Value: true}}).Err(); err != nil {
		t.Fatalf("FindOne: %v", err)
	}

	// A client that does not trust the CA fails the TLS handshake.
	bad := connect(t, srv.URI()+"?tls=true&serverSelectionTimeoutMS=300")
	if err := bad.Ping(c, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Ping without the CA: %v; want a certificate error", err)
	}
}

// TestDriverX509 authenticates the official driver with MONGODB-X509 and a
// client certificate; the driver does it speculatively, in the handshake.
func TestDriverX509(t *testing.T) {
	pki := newPKI(t)
	srv := start(t, mongotest.WithTLS(pki.serverTLS()))
	srv.AddX509User(pki.clientSubj)
	uri := srv.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(pki.caFile) +
		"&tlsCertificateKeyFile=" + url.QueryEscape(pki.clientFile) + "&authMechanism=MONGODB-X509"
	client := connect(t, uri)
	c := ctx(t)
	if _, err := client.Database("x").Collection("c").InsertOne(c, bson.D{{Key: "x509", Value: true}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	st := srv.Stats()
	if st.Authentications[mongotest.MechX509] == 0 || st.Commands["authenticate"] != 0 {
		t.Errorf("authentications %v, %d authenticate commands; want speculative MONGODB-X509", st.Authentications, st.Commands["authenticate"])
	}

	// Without a client certificate the handshake succeeds but the
	// authentication fails.
	noCert := connect(t, srv.URI()+"?tls=true&tlsCAFile="+url.QueryEscape(pki.caFile)+"&authMechanism=MONGODB-X509&serverSelectionTimeoutMS=1000")
	if err := noCert.Ping(c, nil); err == nil {
		t.Error("Ping succeeded without a client certificate")
	}
	if st := srv.Stats(); st.AuthFailures[mongotest.MechX509] == 0 {
		t.Errorf("auth failures %v, want a MONGODB-X509 one", st.AuthFailures)
	}
}
