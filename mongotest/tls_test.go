package mongotest_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestDriverTLS connects the official driver over TLS, verifying the
// server's certificate with the test's CA.
func TestDriverTLS(t *testing.T) {
	pki := testpki.New(t)
	srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
	client := connect(t, srv.URI()+"?tls=true&tlsCAFile="+url.QueryEscape(pki.CAFile))
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
	pki := testpki.New(t)
	srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
	srv.AddX509User(pki.ClientSubject)
	uri := srv.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(pki.CAFile) +
		"&tlsCertificateKeyFile=" + url.QueryEscape(pki.ClientFile) + "&authMechanism=MONGODB-X509"
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
	noCert := connect(t, srv.URI()+"?tls=true&tlsCAFile="+url.QueryEscape(pki.CAFile)+"&authMechanism=MONGODB-X509&serverSelectionTimeoutMS=1000")
	if err := noCert.Ping(c, nil); err == nil {
		t.Error("Ping succeeded without a client certificate")
	}
	if st := srv.Stats(); st.AuthFailures[mongotest.MechX509] == 0 {
		t.Errorf("auth failures %v, want a MONGODB-X509 one", st.AuthFailures)
	}
}
