package mongopool_test

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// The TLS options of the connection string, against a TLS test server.
func TestOpenTLS(t *testing.T) {
	pki := testpki.New(t)
	s := server(t, mongotest.WithTLS(pki.ServerTLS()))
	wrongName := testpki.New(t, "db.example") // valid chain, wrong host name
	s2 := server(t, mongotest.WithTLS(wrongName.ServerTLS()))
	ca := url.QueryEscape(pki.CAFile)
	for _, tc := range []struct {
		name, uri string
		ok        bool
	}{
		{"CA file", s.URI() + "?tls=true&tlsCAFile=" + ca, true},
		{"no CA: unknown authority", s.URI() + "?tls=true", false},
		{"tlsAllowInvalidCertificates", s.URI() + "?tls=true&tlsAllowInvalidCertificates=true", true},
		{"tlsInsecure", s.URI() + "?tls=true&tlsInsecure=true", true},
		{"wrong host name", s2.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(wrongName.CAFile), false},
		{"tlsAllowInvalidHostnames", s2.URI() + "?tls=true&tlsAllowInvalidHostnames=true&tlsCAFile=" + url.QueryEscape(wrongName.CAFile), true},
		{"tlsAllowInvalidHostnames still checks the chain", s2.URI() + "?tls=true&tlsAllowInvalidHostnames=true&tlsCAFile=" + ca, false},
		{"client certificate", s.URI() + "?tls=true&tlsCAFile=" + ca + "&tlsCertificateKeyFile=" + url.QueryEscape(pki.ClientFile), true},
		{"missing tlsCAFile", s.URI() + "?tls=true&tlsCAFile=/nonexistent/ca.pem", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server whose certificate is refused is never found: the
			// selection gives up after half a second, naming why. One that
			// is accepted gets the default wait, since a loaded machine may
			// be late with the first hello.
			uri := tc.uri
			if !tc.ok {
				uri += "&serverSelectionTimeoutMS=500"
			}
			p, err := mongopool.Open(ctx(t), uri)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if _, err := p.RunCommand(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				p.Close()
				t.Fatal("Open succeeded")
			}
			if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
				t.Fatalf("a certificate problem labelled as overload: %v", err)
			}
		})
	}
}

// MONGODB-X509: the client certificate authenticates, speculatively, in the
// hello: no authenticate command follows it.
func TestOpenX509(t *testing.T) {
	pki := testpki.New(t)
	s := server(t, mongotest.WithTLS(pki.ServerTLS()))
	s.AddX509User(pki.ClientSubject)
	uri := s.URI() + "?tls=true&authMechanism=MONGODB-X509&tlsCAFile=" + url.QueryEscape(pki.CAFile) +
		"&tlsCertificateKeyFile=" + url.QueryEscape(pki.ClientFile)
	p := open(t, uri)
	if _, err := p.RunCommand(ctx(t), "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Authentications[mongotest.MechX509] == 0 || st.Commands["authenticate"] != 0 {
		t.Fatalf("authentications %v, %d authenticate commands; want a speculative MONGODB-X509 one", st.Authentications, st.Commands["authenticate"])
	}
	// Without the certificate the server refuses.
	_, err := mongopool.Open(ctx(t), s.URI()+"?tls=true&authMechanism=MONGODB-X509&tlsCAFile="+url.QueryEscape(pki.CAFile))
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) || !ce.DuringAuth {
		t.Fatalf("X509 without a certificate: %v", err)
	}
}

// tlsCertificateKeyFilePassword opens a key encrypted with the legacy PEM
// encryption; a wrong password is a clear error.
func TestOpenEncryptedClientKey(t *testing.T) {
	pki := testpki.New(t)
	s := server(t, mongotest.WithTLS(pki.ServerTLS()))
	data, err := os.ReadFile(pki.ClientFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			//lint:ignore SA1019 the legacy format is what the option is for
			if b, err = x509.EncryptPEMBlock(rand.Reader, b.Type, b.Bytes, []byte("s3cret"), x509.PEMCipherAES256); err != nil { //nolint:staticcheck
				t.Fatal(err)
			}
		}
		out = append(out, pem.EncodeToMemory(b)...)
	}
	file := filepath.Join(t.TempDir(), "client-encrypted.pem")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	base := s.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(pki.CAFile) + "&tlsCertificateKeyFile=" + url.QueryEscape(file)
	p := open(t, base+"&tlsCertificateKeyFilePassword=s3cret")
	if _, err := p.RunCommand(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = mongopool.Open(ctx(t), base+"&tlsCertificateKeyFilePassword=wrong-pw")
	if err == nil || !strings.Contains(err.Error(), "tlsCertificateKeyFilePassword") || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("wrong key password: %v", err)
	}
}
