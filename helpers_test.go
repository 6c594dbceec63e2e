package mongopool_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
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

// e2eEventLog records a pool's events, in order, and lets a test wait for one.
type e2eEventLog struct {
	// src, once attached, is flushed before the events are read: they
	// are delivered on goroutines of the pool's, a moment after what the
	// test did.
	src     flusher
	mu      sync.Mutex
	events  []pool.Event
	changed chan struct{}
}

// attach makes the log wait for f's events before it is read.
func (l *e2eEventLog) attach(f flusher) {
	l.mu.Lock()
	l.src = f
	l.mu.Unlock()
}

func newE2EEventLog() *e2eEventLog { return &e2eEventLog{changed: make(chan struct{}, 1)} }

// handler is the function to give pool.WithEventHandler.
func (l *e2eEventLog) handler(e pool.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// all returns the events so far.
func (l *e2eEventLog) all() []pool.Event {
	l.mu.Lock()
	src := l.src
	l.mu.Unlock()
	if src != nil {
		c, cancel := context.WithTimeout(context.Background(), hangLimit)
		defer cancel()
		if err := src.Flush(c); err != nil {
			panic("the events were not delivered within " + hangLimit.String() + ": " + err.Error())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]pool.Event(nil), l.events...)
}

// filter returns the events so far that match.
func (l *e2eEventLog) filter(match func(pool.Event) bool) []pool.Event {
	var out []pool.Event
	for _, e := range l.all() {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// last returns the last event of type typ.
func (l *e2eEventLog) last(t *testing.T, typ pool.EventType) pool.Event {
	t.Helper()
	all := l.filter(func(e pool.Event) bool { return e.Type == typ })
	if len(all) == 0 {
		t.Fatalf("no %v event; events: %v", typ, l.all())
	}
	return all[len(all)-1]
}

// waitFor waits until an event matches, and returns the first that does.
func (l *e2eEventLog) waitFor(ctx context.Context, t *testing.T, what string, match func(pool.Event) bool) pool.Event {
	t.Helper()
	return l.waitN(ctx, t, what, 1, match)[0]
}

// waitN waits until n events match, and returns those that do.
func (l *e2eEventLog) waitN(ctx context.Context, t *testing.T, what string, n int, match func(pool.Event) bool) []pool.Event {
	t.Helper()
	for {
		if m := l.filter(match); len(m) >= n {
			return m
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; events: %v", what, ctx.Err(), l.all())
		}
	}
}

// e2eClosedConn matches the ConnectionClosed event of connection id.
func e2eClosedConn(id int64) func(pool.Event) bool {
	return func(e pool.Event) bool { return e.Type == pool.ConnectionClosed && e.ConnectionID == id }
}

// hangLimit bounds each wait of the tests that use ctx or caseLimits: a
// regression that leaves a check-out or a command waiting (a pool that never
// hands a check-out its connection, or its error) fails the test after this
// long, with a message, rather than at the package's timeout. Every wait it
// bounds ends within a second or so on loopback.
const hangLimit = 10 * time.Second

// openCtx is Open under c, with the pool closed at the end of the test.
func openCtx(t *testing.T, c context.Context, uri string, opts ...pool.Option) *mongopool.Pool {
	t.Helper()
	p, err := mongopool.Open(c, uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// caseLimits gives the waits of a table's cases their contexts, each ending
// after hangLimit, and stops the table once a case has waited that long: a
// regression that hangs one case hangs the others the same way, and a table
// of ten would otherwise fail after ten limits rather than one.
type caseLimits struct {
	mu      sync.Mutex
	hung    string   // the first case one of whose waits reached the limit
	skipped []string // the cases not run since
}

// ctx returns a context for one wait of the case t, ending after hangLimit.
func (l *caseLimits) ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), hangLimit)
	t.Cleanup(func() {
		// Read before cancel: an expired deadline means the case hung.
		if c.Err() != nil {
			l.mu.Lock()
			if l.hung == "" {
				l.hung = t.Name()
			}
			l.mu.Unlock()
		}
		cancel()
	})
	return c
}

// run runs the case f as t.Run does, unless an earlier case hung.
func (l *caseLimits) run(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	l.mu.Lock()
	hung := l.hung != ""
	if hung {
		if len(l.skipped) == 0 {
			t.Cleanup(func() {
				l.mu.Lock()
				defer l.mu.Unlock()
				t.Errorf("%s waited %v; the cases after it, which would wait as long, were not run: %q", l.hung, hangLimit, l.skipped)
			})
		}
		l.skipped = append(l.skipped, name)
	}
	l.mu.Unlock()
	if !hung {
		t.Run(name, f)
	}
}

// waitFor waits until cond holds, for state the tests can only look at (no
// event tells of it), failing the test after hangLimit with what it waited
// for, as what says then.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what())
		}
		time.Sleep(time.Millisecond)
	}
}

// flusher is what delivers events on a goroutine of its own: a Client, a
// Pool of this package, a pool.Pool.
type flusher interface {
	Flush(ctx context.Context) error
}

// flush waits, at most hangLimit, for f's event handlers to have every event
// so far: a test checks the events of what it did once they are delivered.
func flush(t testing.TB, f flusher) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	if err := f.Flush(c); err != nil {
		t.Fatalf("the events were not delivered within %v: %v", hangLimit, err)
	}
}

// barePool is a ready pool.Pool of uri's one server with the real connector
// and uri's pool options, and opts, without a topology in front: for the
// tests of what the pool does when establishing a connection fails, which a
// client's monitor would meet first. It is closed at the end of the test.
func barePool(t *testing.T, uri string, opts ...pool.Option) *pool.Pool {
	t.Helper()
	address, connector, uriOpts, err := mongopool.PoolParts(uri)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(address, connector, append(uriOpts, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOutOnce checks a connection out of p and back in, and returns the
// check-out's error.
func checkOutOnce(c context.Context, p *pool.Pool) error {
	return p.Do(c, func(*pool.Conn) error { return nil })
}

// inBubble runs fn in a testing/synctest bubble, on its fake clock, with an
// in-memory network for servers and clients, closed at the end: the tests of
// what happens over seconds (heartbeats, backoffs, timeouts) take no real
// time, and none races a heartbeat.
func inBubble(t *testing.T, fn func(t *testing.T, n *mongotest.Network)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		n := mongotest.NewNetwork()
		t.Cleanup(func() { n.Close() }) // registered first: it runs last
		fn(t, n)
	})
}

// bubblePool is the Pool of uri's server on the network n, closed at the end
// of the test.
func bubblePool(t *testing.T, n *mongotest.Network, uri string, opts ...pool.Option) *mongopool.Pool {
	t.Helper()
	p, err := mongopool.NewWithDialer(uri, n.DialContext, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// bubbleServer starts a test server on the network n.
func bubbleServer(t *testing.T, n *mongotest.Network, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	s, err := mongotest.Start(append(opts, mongotest.WithNetwork(n))...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
