package mongotest_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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

	// A client that does not trust the CA fails the TLS handshake. The
	// failure is awaited through the driver's server monitoring rather than
	// through a server selection timeout short enough to beat the monitor's
	// first check on a busy machine: see badCertificateClient.
	bad, failures := badCertificateClient(t, srv.URI()+"?tls=true&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=300")
	first := awaitHeartbeatFailure(t, c, failures)
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(first, &unknownCA) {
		t.Fatalf("heartbeat without the CA failed with %v (%T); want an x509.UnknownAuthorityError", first, first)
	}
	// The monitor records a check's failure in the server's description
	// before it starts the next check: after a second failure, the
	// description that server selection reports holds the first one.
	awaitHeartbeatFailure(t, c, failures)
	if err := bad.Ping(c, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Ping without the CA: %v; want a certificate error", err)
	}
}

// badCertificateClient connects the official driver to uri and returns the
// failures of its server monitor's checks (heartbeats) as they come; the
// channel keeps the first ones, later ones are dropped rather than block the
// monitor.
func badCertificateClient(t *testing.T, uri string) (*mongo.Client, <-chan error) {
	t.Helper()
	failures := make(chan error, 8)
	monitor := &event.ServerMonitor{
		ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) {
			select {
			case failures <- e.Failure:
			default:
			}
		},
	}
	return connectWith(t, options.Client().ApplyURI(uri).SetServerMonitor(monitor)), failures
}

// awaitHeartbeatFailure returns the next failure from failures, or fails the
// test when ctx ends first.
func awaitHeartbeatFailure(t *testing.T, ctx context.Context, failures <-chan error) error {
	t.Helper()
	select {
	case err := <-failures:
		return err
	case <-ctx.Done():
		t.Fatalf("no failed heartbeat of the client without the CA: %v", ctx.Err())
		return nil
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
	noCert := connect(t, srv.URI()+"?tls=true&tlsCAFile="+url.QueryEscape(pki.CAFile)+"&authMechanism=MONGODB-X509")
	if err := noCert.Ping(c, nil); err == nil {
		t.Error("Ping succeeded without a client certificate")
	}
	if st := srv.Stats(); st.AuthFailures[mongotest.MechX509] == 0 {
		t.Errorf("auth failures %v, want a MONGODB-X509 one", st.AuthFailures)
	}
}
