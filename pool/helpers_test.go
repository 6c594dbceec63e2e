package pool_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// hangLimit bounds every wait of the tests, so that a regression that leaves
// a check-out, a Close or an awaited event waiting fails its test with a
// message instead of hanging until the package's timeout. Outside a synctest
// bubble it is real time, far beyond what any of these waits takes. Inside a
// bubble it is the bubble's fake clock, which moves on whenever every
// goroutine waits (the pool's maintenance timer alone would keep it moving
// forever): the limit is reached at once.
const hangLimit = 10 * time.Second

// hung fails the test for a wait that has not ended after d, with every
// goroutine's stack to show where each one waits.
func hung(t testing.TB, what string, d time.Duration) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("%s: still waiting after %v (a deadlock, or a wake-up that never comes); goroutines:\n%s", what, d, buf)
}

// within runs fn on its own goroutine and fails the test if fn has not
// returned after d.
func within(t testing.TB, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		hung(t, "a call", d)
	}
}

// recv returns the next value of ch, failing the test if none comes within
// hangLimit; what names the value for the message.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		hung(t, what, hangLimit)
		panic("unreachable: hung ends the test")
	}
}

// checkOut is p.CheckOut(ctx), run on its own goroutine so that the test
// fails after hangLimit, rather than hang, whatever the pool does: even a
// context's deadline is of no help when the pool forgets to wake a
// check-out.
func checkOut(t testing.TB, ctx context.Context, p *pool.Pool) (*pool.Conn, error) {
	t.Helper()
	r := recv(t, checkOutAsync(ctx, p), "a check-out")
	return r.c, r.err
}

// do is p.Do(ctx, fn), bounded as checkOut is.
func do(t testing.TB, ctx context.Context, p *pool.Pool, fn func(*pool.Conn) error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- p.Do(ctx, fn) }()
	return recv(t, ch, "Do")
}

// closePool is p.Close(), failing the test if it has not returned after
// hangLimit; it then waits for the events of the closing to be delivered.
func closePool(t testing.TB, p *pool.Pool) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- p.Close() }()
	if err := recv(t, ch, "Close"); err != nil {
		t.Fatal(err)
	}
	if err := flush(p); err != nil {
		t.Fatalf("the events of the closing were not delivered: %v", err)
	}
}

// flush waits, at most hangLimit, for p's handlers to have every event p
// emitted so far: the events of what a test did are delivered on the pool's
// goroutine, a moment later.
func flush(p *pool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	return p.Flush(ctx)
}

// evLog records a pool's events and lets a test wait for them.
type evLog struct {
	// pool, once set, is waited for by all: the events of what a test did
	// are delivered on the pool's goroutine, a moment later.
	pool   *pool.Pool
	mu     sync.Mutex
	events []pool.Event
	signal chan struct{} // closed and replaced on every event
}

func newEvLog() *evLog { return &evLog{signal: make(chan struct{})} }

func (l *evLog) handle(e pool.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	close(l.signal)
	l.signal = make(chan struct{})
	l.mu.Unlock()
}

func (l *evLog) all() []pool.Event {
	if l.pool != nil {
		if err := flush(l.pool); err != nil {
			panic("the pool's events were not delivered within 10s: " + err.Error())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]pool.Event(nil), l.events...)
}

// types returns the types of the recorded events, minus those in skip.
func (l *evLog) types(skip ...pool.EventType) []string {
	var out []string
next:
	for _, e := range l.all() {
		for _, s := range skip {
			if e.Type == s {
				continue next
			}
		}
		out = append(out, e.Type.String())
	}
	return out
}

func (l *evLog) count(t pool.EventType) int {
	n := 0
	for _, e := range l.all() {
		if e.Type == t {
			n++
		}
	}
	return n
}

// waitFor blocks until n events of type t were recorded, failing the test
// after hangLimit.
func (l *evLog) waitFor(t testing.TB, typ pool.EventType, n int) {
	t.Helper()
	timeout := time.NewTimer(hangLimit)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		c, got := l.signal, 0
		for _, e := range l.events {
			if e.Type == typ {
				got++
			}
		}
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c:
		case <-timeout.C:
			t.Fatalf("waited for %d %v events, saw %d: %v", n, typ, got, l.types())
		}
	}
}

// newPool makes a pool with the fake connector and an event log, closed when
// the test ends.
func newPool(t testing.TB, f *fakeConnector, opts ...pool.Option) (*pool.Pool, *evLog) {
	t.Helper()
	log := newEvLog()
	opts = append([]pool.Option{pool.WithEventHandler(log.handle)}, opts...)
	p, err := pool.New("127.0.0.1:27017", f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	log.pool = p
	t.Cleanup(func() { closePool(t, p) })
	return p, log
}

// readyPool makes a ready pool with the fake connector, closed when the test
// ends. Unlike newPool it adds no event handler: nobody listens unless opts
// say so, as the tests and benchmarks of allocations and speed need.
func readyPool(t testing.TB, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New("127.0.0.1:27017", &fakeConnector{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePool(t, p) })
	mustReady(t, p)
	return p
}

// must fails the test at once if err is not nil.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustReady(t testing.TB, p *pool.Pool) {
	t.Helper()
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
}

// mustCheckOut checks a connection out, failing the test if that fails or
// has not ended after hangLimit. The check-out has no deadline of its own:
// the pool's path for a check-out that nothing but its result can end is
// the one taken.
func mustCheckOut(t testing.TB, p *pool.Pool) *pool.Conn {
	t.Helper()
	c, err := checkOut(t, context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCheckIn(t testing.TB, p *pool.Pool, c *pool.Conn) {
	t.Helper()
	if err := p.CheckIn(c); err != nil {
		t.Fatal(err)
	}
}

// idleRoundTripAllocs returns how many allocations a check-out and check-in
// of an idle connection of p makes, on average over 1000 rounds, after a
// first round that establishes the connection. The rounds run on the test's
// goroutine, without the bounds of checkOut, whose goroutine would count.
func idleRoundTripAllocs(t *testing.T, p *pool.Pool) float64 {
	t.Helper()
	mustCheckIn(t, p, mustCheckOut(t, p))
	ctx := context.Background()
	return testing.AllocsPerRun(1000, func() {
		c, err := p.CheckOut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckIn(c); err != nil {
			t.Fatal(err)
		}
	})
}

// checkOutAsync starts a check-out on its own goroutine.
func checkOutAsync(ctx context.Context, p *pool.Pool) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := p.CheckOut(ctx)
		ch <- result{c, err}
	}()
	return ch
}

type result struct {
	c   *pool.Conn
	err error
}

// checkCounts asserts the invariants a Stats snapshot must hold.
func checkCounts(t testing.TB, s pool.Stats) {
	t.Helper()
	if s.Total != s.Available+s.Pending+s.InUse {
		t.Errorf("total %d != available %d + pending %d + in use %d", s.Total, s.Available, s.Pending, s.InUse)
	}
	if int64(s.Total) != s.Created-s.Closed {
		t.Errorf("total %d != created %d - closed %d", s.Total, s.Created, s.Closed)
	}
	if int64(s.InUse) != s.CheckedOut-s.CheckedIn {
		t.Errorf("in use %d != checked out %d - checked in %d", s.InUse, s.CheckedOut, s.CheckedIn)
	}
	if s.MaxPoolSize > 0 && s.Total > s.MaxPoolSize {
		t.Errorf("total %d above maxPoolSize %d", s.Total, s.MaxPoolSize)
	}
	if s.Pending > s.MaxConnecting {
		t.Errorf("pending %d above maxConnecting %d", s.Pending, s.MaxConnecting)
	}
	// The distributions are read in the same snapshot: one wait per
	// check-out, successful or not, and at most one use per check-in.
	checkHistogram(t, "CheckOutWait", s.CheckOutWait)
	checkHistogram(t, "Establish", s.Establish)
	checkHistogram(t, "Use", s.Use)
	if int64(s.CheckOutWait.Count) != s.CheckedOut+s.CheckOutFailed {
		t.Errorf("%d check-out waits != checked out %d + failed %d", s.CheckOutWait.Count, s.CheckedOut, s.CheckOutFailed)
	}
	if int64(s.Use.Count) > s.CheckedIn {
		t.Errorf("%d uses timed, more than the %d check-ins", s.Use.Count, s.CheckedIn)
	}
	if int64(s.Establish.Count) > s.Created {
		t.Errorf("%d establishments timed, more than the %d connections created", s.Establish.Count, s.Created)
	}
}
