// Package testpki makes the certificates TLS tests need: a CA, a server
// certificate signed by it and a client certificate, written to a test's
// temporary directory.
package testpki

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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA with a server and a client certificate.
type PKI struct {
	CAPool *x509.CertPool
	CAFile string // the CA certificate, PEM

	Server         tls.Certificate
	ServerCertFile string // the server certificate, PEM
	ServerKeyFile  string // its key, PEM

	ClientFile    string // the client certificate and its key in one PEM file
	ClientSubject string // the client certificate's subject, RFC 2253
}

// New makes a PKI whose server certificate is for serverNames (IP addresses or
// DNS names); 127.0.0.1 and localhost when none is given.
func New(t testing.TB, serverNames ...string) *PKI {
	t.Helper()
	if len(serverNames) == 0 {
		serverNames = []string{"127.0.0.1", "localhost"}
	}
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
		Subject:               pkix.Name{CommonName: "mongopool test CA"},
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
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
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
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := &PKI{CAPool: x509.NewCertPool()}
	p.CAPool.AddCert(ca)
	p.CAFile = write("ca.pem", pemOf("CERTIFICATE", caDER))

	srvTmpl := &x509.Certificate{Subject: pkix.Name{CommonName: serverNames[0]}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range serverNames {
		if ip := net.ParseIP(n); ip != nil {
			srvTmpl.IPAddresses = append(srvTmpl.IPAddresses, ip)
		} else {
			srvTmpl.DNSNames = append(srvTmpl.DNSNames, n)
		}
	}
	srvKey, srvDER := issue(2, srvTmpl)
	p.ServerCertFile = write("server.pem", pemOf("CERTIFICATE", srvDER))
	p.ServerKeyFile = write("server.key", keyPEM(srvKey))
	if p.Server, err = tls.X509KeyPair(pemOf("CERTIFICATE", srvDER), keyPEM(srvKey)); err != nil {
		t.Fatal(err)
	}

	subject := pkix.Name{CommonName: "client", OrganizationalUnit: []string{"Drivers"}, Organization: []string{"MongoDB"}, Country: []string{"IS"}}
	cliKey, cliDER := issue(3, &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	cli, err := x509.ParseCertificate(cliDER)
	if err != nil {
		t.Fatal(err)
	}
	p.ClientSubject = cli.Subject.String()
	p.ClientFile = write("client.pem", append(pemOf("CERTIFICATE", cliDER), keyPEM(cliKey)...))
	return p
}

// ServerTLS is a server's tls.Config: the server certificate, and client
// certificates verified when given.
func (p *PKI) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Server},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.CAPool,
		MinVersion:   tls.VersionTLS12,
	}
}
