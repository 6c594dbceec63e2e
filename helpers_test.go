package mongopool_test

import (
	"net"
	"sync"
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: pools, the
// monitor of New's pools, test servers and the unified runner all have to be
// closed by the tests that start them.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// refusedURI returns the URI of a port nothing listens on: connecting to it
// is refused.
func refusedURI(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "mongodb://" + addr + "/"
}

// rawListener accepts connections and hands each to serve, on its own
// goroutine, and returns the listener's address. The test's cleanup closes
// the listener and every connection, so that serve returns from any read or
// write, and waits for the goroutines.
func rawListener(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed bool
		conns  []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				// Accepted as the cleanup ran: nobody would close it later.
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}
