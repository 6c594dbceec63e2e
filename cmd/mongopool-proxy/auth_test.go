package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/proxy"
)

// authProxy is a proxy command that authenticates its clients (-users),
// over TLS only (-tls-cert, -tls-key, and -tls-ca for the client
// certificates of MONGODB-X509).
type authProxy struct {
	addr, admin string
	pki         *testpki.PKI
	// passwords are the SCRAM users' passwords, by name: alice's entry
	// derived with proxy.DeriveUser (SCRAM-SHA-256), bob's with the user
	// subcommand (SCRAM-SHA-256 and SCRAM-SHA-1).
	passwords map[string]string
}

// startAuthProxy runs the command in front of upstream (none: an
// in-process test replica set) with a users file of alice, bob and the X.509
// user of the test PKI's client certificate, until the test ends; its log
// goes to logs.
func startAuthProxy(t *testing.T, upstream string, logs io.Writer) *authProxy {
	t.Helper()
	pki := testpki.New(t)
	a := &authProxy{pki: pki, passwords: map[string]string{"alice": randomPassword(t), "bob": randomPassword(t)}}

	alice, err := proxy.DeriveUser("alice", "admin", a.passwords["alice"], "", proxy.MechSCRAMSHA256)
	if err != nil {
		t.Fatal(err)
	}
	// bob's entry as an operator makes one: the password on the user
	// subcommand's standard input, the entry on its output.
	var bob, stderr strings.Builder
	if code := runWith(t.Context(), []string{"user", "-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-1", "bob"},
		strings.NewReader(a.passwords["bob"]+"\n"), &bob, &stderr, nil); code != 0 {
		t.Fatalf("mongopool-proxy user bob: exit %d: %s", code, stderr.String())
	}
	if strings.Contains(bob.String(), a.passwords["bob"]) {
		t.Fatalf("the user subcommand printed the password: %s", bob.String())
	}
	x509User := proxy.User{Name: pki.ClientSubject, DB: "$external", X509: true}
	users, err := json.Marshal(map[string][]any{"users": {alice, json.RawMessage(bob.String()), x509User}})
	if err != nil {
		t.Fatal(err)
	}
	usersFile := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(usersFile, users, 0o600); err != nil {
		t.Fatal(err)
	}

	// The failed authentications the tests make on purpose come from one
	// address, and a driver tries again and again until its server
	// selection times out: the rate limit (tested in package proxy) must
	// not refuse the tests' good attempts that follow.
	args := []string{"-listen", "127.0.0.1:0", "-shutdown-timeout", "5s", "-users", usersFile, "-max-auth-failures", "100000",
		"-tls-cert", pki.ServerCertFile, "-tls-key", pki.ServerKeyFile, "-tls-ca", pki.CAFile}
	if upstream != "" {
		args = append(args, "-upstream", upstream)
	}
	mongos, _, admin := startCommandLogging(t, logs, args...)
	a.addr, a.admin = mongos[0], admin
	return a
}

// passwordsJSON is the users' passwords by name, in JSON.
func (a *authProxy) passwordsJSON(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(a.passwords)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// uri is a connection string of the proxy over TLS, with the test CA, and
// the options query (URI options, escaped) besides; credentials is
// "user:password@" or empty.
func (a *authProxy) uri(credentials, query string) string {
	uri := "mongodb://" + credentials + a.addr + "/?tls=true&tlsCAFile=" + url.QueryEscape(a.pki.CAFile)
	if query != "" {
		uri += "&" + query
	}
	return uri
}

func randomPassword(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestAuthenticationOverTLS runs the command with -users and TLS, and
// checks it with the Go driver: SCRAM-SHA-256 and SCRAM-SHA-1 users of
// entries derived in Go and by the user subcommand, MONGODB-X509 with the
// client certificate, a wrong password, no credentials, and a cursor that
// another user tries to read.
func TestAuthenticationOverTLS(t *testing.T) {
	a := startAuthProxy(t, "", io.Discard)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	connect := func(uri string) *mongo.Client {
		t.Helper()
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(20 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect(context.Background()) })
		return c
	}

	clients := map[string]*mongo.Client{}
	for _, c := range []struct{ name, credentials, query string }{
		{"alice", "alice:" + a.passwords["alice"] + "@", "authMechanism=SCRAM-SHA-256"},
		{"bob", "bob:" + a.passwords["bob"] + "@", "authMechanism=SCRAM-SHA-1"},
		{"x509", "", "authMechanism=MONGODB-X509&tlsCertificateKeyFile=" + url.QueryEscape(a.pki.ClientFile)},
	} {
		cl := connect(a.uri(c.credentials, c.query))
		coll := cl.Database("authtls").Collection(c.name)
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "by", Value: c.name}}); err != nil {
			t.Fatalf("%s: insert: %v", c.name, err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{{Key: "by", Value: c.name}}); err != nil || n != 1 {
			t.Fatalf("%s: count = %d, %v; want 1", c.name, n, err)
		}
		clients[c.name] = cl
	}

	// A wrong password.
	err := connect(a.uri("alice:wrong@", "")).Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Errorf("a wrong password: %v, want Authentication failed", err)
	}
	// No credentials: Unauthorized.
	err = connect(a.uri("", "")).Database("authtls").Collection("alice").FindOne(ctx, bson.D{}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("a find without credentials: %v, want Unauthorized (13), requires authentication", err)
	}

	// alice's cursor is not bob's to read.
	coll := clients["alice"].Database("authtls").Collection("cursor")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	err = clients["bob"].Database("authtls").RunCommand(ctx, bson.D{{Key: "getMore", Value: cur.ID()}, {Key: "collection", Value: "cursor"}}).Err()
	if !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Errorf("bob's getMore of alice's cursor: %v, want Unauthorized (13)", err)
	}
	n := 0
	for cur.Next(ctx) {
		n++
	}
	if cur.Err() != nil || n != 3 {
		t.Errorf("alice's cursor after bob's getMore: %d documents, %v; want 3", n, cur.Err())
	}
}

// TestUnauthorizedHasCodeName checks that the Unauthorized error of a
// command before authentication names its code, as mongod's does
// ({code: 13, codeName: "Unauthorized"}).
func TestUnauthorizedHasCodeName(t *testing.T) {
	a := startAuthProxy(t, "", io.Discard)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(a.uri("", "")).SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	err = c.Database("authtls").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 13 || ce.Name != "Unauthorized" {
		t.Fatalf("a find without credentials: %v (codeName %q), want code 13, codeName Unauthorized", err, ce.Name)
	}
}
