package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/internal/embedded"
	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// TestMain fails the run if a goroutine outlives the tests: every pool and
// every embedded FerretDB has to be closed by the test that starts it.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func startFerretDB(t *testing.T, opts embedded.Options) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func open(t *testing.T, uri string, opts ...pool.Option) *mongopool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := mongopool.Open(ctx, uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The handshake against a server we did not write: hello accepted with our
// client metadata, the server's limits kept on the connection.
func TestFerretDBHandshake(t *testing.T) {
	s := startFerretDB(t, embedded.Options{})
	p := open(t, s.URI()+"?appName=mongopool-integration&maxPoolSize=5")
	ctx := testCtx(t)
	err := p.Do(ctx, func(c *connection.Conn) error {
		d := c.Description()
		if d.MaxWireVersion < 8 || d.MaxBSONObjectSize <= 0 || d.MaxMessageSizeBytes <= 0 || !d.HasConnectionID {
			return fmt.Errorf("hello description %+v", d)
		}
		// The server kept what we said in the handshake.
		reply, err := c.RoundTrip(ctx, mustRaw(t, bson.D{{Key: "whatsmyuri", Value: 1}, {Key: "$db", Value: "admin"}}))
		if err != nil {
			return err
		}
		if _, err := reply.LookupErr("you"); err != nil {
			return fmt.Errorf("whatsmyuri reply %v", reply)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Created != 1 || st.MaxPoolSize != 5 {
		t.Fatalf("stats %+v: want the one connection Open made, and maxPoolSize from the URI", st)
	}
}

// Inserts and finds through pooled connections from many goroutines.
func TestFerretDBConcurrentCRUD(t *testing.T) {
	s := startFerretDB(t, embedded.Options{})
	p := open(t, s.URI()+"?maxPoolSize=4")
	ctx := testCtx(t)
	const workers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				doc := bson.D{{Key: "_id", Value: w*1000 + i}, {Key: "w", Value: w}}
				reply, err := p.RunCommand(ctx, "itest", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc}}})
				if err != nil {
					errs <- err
					return
				}
				if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
					errs <- fmt.Errorf("insert reply %v", reply)
					return
				}
			}
			reply, err := p.RunCommand(ctx, "itest", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "w", Value: w}}}})
			if err != nil {
				errs <- err
				return
			}
			batch, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
			if len(batch) != each {
				errs <- fmt.Errorf("worker %d found %d documents, want %d", w, len(batch), each)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Total > 4 || st.InUse != 0 || st.CheckedOut != workers*(each+1)+1 {
		t.Fatalf("stats %+v", st)
	}
}

// A clear with interruptInUseConnections while a command runs: the command
// fails with the retryable error, and the pool works again once ready.
func TestFerretDBClearWhileInUse(t *testing.T) {
	s := startFerretDB(t, embedded.Options{})
	p := open(t, s.URI())
	ctx := testCtx(t)
	ping := mustRaw(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	inUse := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- p.Do(ctx, func(c *connection.Conn) error {
			close(inUse)
			// Keep the connection busy until the clear closes it.
			for {
				if _, err := c.RoundTrip(ctx, ping); err != nil {
					return err
				}
			}
		})
	}()
	select {
	case <-inUse:
	case err := <-done:
		t.Fatalf("Do ended before the clear: %v", err)
	}
	if err := p.Pool().Clear(pool.ClearOptions{Cause: errors.New("monitor timed out"), InterruptInUse: true}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var pce *pool.PoolClearedError
	if !errors.As(err, &pce) || !pce.Interrupted || !pool.HasErrorLabel(err, pool.LabelRetryable) {
		t.Fatalf("interrupted command: %v", err)
	}
	if _, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); !errors.Is(err, pool.ErrPoolCleared) {
		t.Fatalf("command on the paused pool: %v", err)
	}
	if err := p.Pool().Ready(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.ClosedStale < 1 || st.Generation != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TLS through FerretDB's TLS listener, with certificates made here.
func TestFerretDBTLS(t *testing.T) {
	pki := testpki.New(t)
	s := startFerretDB(t, embedded.Options{TLS: true, CertFile: pki.ServerCertFile, KeyFile: pki.ServerKeyFile})
	p := open(t, fmt.Sprintf("mongodb://%s/?tls=true&tlsCAFile=%s", s.Addr(), pki.CAFile))
	if _, err := p.RunCommand(testCtx(t), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	// Another CA: certificate verification fails (the monitor's first, so
	// that Open fails once serverSelectionTimeoutMS has passed, with that
	// error), and such an error is never taken for overload.
	other := testpki.New(t)
	ctx := testCtx(t)
	_, err := mongopool.Open(ctx, fmt.Sprintf("mongodb://%s/?tls=true&tlsCAFile=%s&serverSelectionTimeoutMS=500", s.Addr(), other.CAFile))
	if err == nil {
		t.Fatal("Open with the wrong CA succeeded")
	}
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		t.Fatalf("Open with the wrong CA: %v, want the certificate verification error", err)
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		t.Fatalf("certificate error labelled as overload: %v", err)
	}
}

// A server that is not there: Open waits for it until
// serverSelectionTimeoutMS, then fails with the server selection error,
// which names the server with its last error and unwraps to it (the
// refused connection).
func TestOpenUnreachable(t *testing.T) {
	s := startFerretDB(t, embedded.Options{})
	addr := s.Addr()
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := mongopool.Open(ctx, "mongodb://"+addr+"/?connectTimeoutMS=2000&serverSelectionTimeoutMS=500")
	var se *topology.SelectionError
	if !errors.As(err, &se) || se.Timeout != 500*time.Millisecond {
		t.Fatalf("Open of a closed port: %v, want a server selection error after serverSelectionTimeoutMS", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Open of a closed port lasted until the context's end: %v", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of a closed port: %v, want the address and the refused connection", err)
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
