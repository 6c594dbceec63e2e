package otelmetrics_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// hangLimit bounds every wait of the tests, so that a regression that leaves
// one waiting fails in seconds with a message.
const hangLimit = 10 * time.Second

// link stands for an established connection.
type link struct{}

func (link) Close() error { return nil }
func (link) Err() error   { return nil }

// connector establishes connections at once, or, while held, tells of each
// establishment on started and keeps it waiting until release.
type connector struct {
	mu      sync.Mutex
	held    bool
	started chan struct{}
	release chan struct{}
}

func newConnector() *connector {
	return &connector{started: make(chan struct{}, 16)}
}

// hold makes the establishments that start from now on wait for unhold.
func (c *connector) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		c.held, c.release = true, make(chan struct{})
	}
}

// unhold lets the held establishments finish, and the next ones go at once.
func (c *connector) unhold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		c.held = false
		close(c.release)
	}
}

func (c *connector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	c.mu.Lock()
	held, release := c.held, c.release
	c.mu.Unlock()
	if held {
		c.started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.HelloDone(pool.ServiceID{})
	return link{}, nil
}

// newPool returns a ready pool of c's connections without background
// maintenance, so that nothing but the test changes it; it is closed when the
// test ends.
func newPool(t *testing.T, address string, c *connector, opts ...pool.Option) *pool.Pool {
	t.Helper()
	opts = append([]pool.Option{pool.WithMaintenanceInterval(-1)}, opts...)
	p, err := pool.New(address, c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOut checks a connection out of p, failing the test if it cannot.
func checkOut(t *testing.T, p *pool.Pool) *pool.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	c, err := p.CheckOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// timeOut makes one check-out of p fail for its context: it is canceled
// before the check-out starts.
func timeOut(t *testing.T, p *pool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := p.CheckOut(ctx); err == nil {
		p.CheckIn(c)
		t.Fatal("a check-out with a canceled context succeeded")
	}
}

// recv returns the next value of ch, failing the test if none comes within
// hangLimit.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, hangLimit)
		panic("unreachable")
	}
}

// waitStats waits until p's stats satisfy cond, failing the test after
// hangLimit. It is for the states no event tells of, such as a check-out
// having joined the queue.
func waitStats(t *testing.T, p *pool.Pool, what string, cond func(pool.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for !cond(p.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; stats %+v", what, hangLimit, p.Stats())
		}
		runtime.Gosched()
	}
}
