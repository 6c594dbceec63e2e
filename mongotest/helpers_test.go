package mongotest_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// testTimeout bounds every test's work with the server.
const testTimeout = 20 * time.Second

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its servers and disconnects its clients.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// serverGoroutines are the goroutines of the mongotest package, not of its
// tests (which are mongotest_test).
var serverGoroutines = leakcheck.Only("mongopool/mongotest.")

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
// when the test ends. Server selection waits up to testTimeout, unless the
// URI says otherwise: a loaded machine may be seconds late answering the
// driver's first hello, and a test that expects an error gets it at once.
func connect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	return connectWith(t, options.Client().SetServerSelectionTimeout(testTimeout).ApplyURI(uri))
}

// connectWith connects the official driver with the merged opts; the client
// is disconnected when the test ends.
func connectWith(t *testing.T, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	merged := options.MergeClientOptions(opts...)
	client, err := mongo.Connect(merged)
	if err != nil {
		t.Fatalf("mongo.Connect(%v): %v", merged.GetURI(), err)
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

// closeAndCheck closes srv (a server or a replica set) within testTimeout and checks that no goroutine
// of the package is left.
func closeAndCheck(t *testing.T, srv interface{ Close() error }) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatalf("Close did not return; goroutines:\n%s", strings.Join(leakcheck.Running(serverGoroutines), "\n\n"))
	}
	if left := leakcheck.Remaining(serverGoroutines); len(left) > 0 {
		t.Fatalf("%d goroutines of mongotest left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
