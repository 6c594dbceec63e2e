package mongotest_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// testTimeout bounds every test's work with the server.
const testTimeout = 20 * time.Second

// start starts a server that the test closes when it ends.
func start(t *testing.T, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	srv, err := mongotest.Start(opts...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// ctx returns a context that ends with the test, or after testTimeout.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// connect connects the official driver to uri; the client is disconnected
// when the test ends. Server selection is kept short (5s, unless the URI
// says otherwise) so that failures are quick.
func connect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().SetServerSelectionTimeout(5 * time.Second).ApplyURI(uri))
	if err != nil {
		t.Fatalf("mongo.Connect(%s): %v", uri, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Disconnect(c); err != nil {
			t.Errorf("Disconnect: %v", err)
		}
	})
	return client
}

// md5Hex returns the hex MD5 of s.
func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
