package prommetrics_test

import (
	"context"
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

// connector establishes connections after delay (on the fake clock of a
// synctest bubble, an exact delay), or, while held, keeps each establishment
// waiting until it is released.
type connector struct {
	delay   time.Duration
	mu      sync.Mutex
	held    bool
	release chan struct{}
}

func newConnector(delay time.Duration) *connector {
	return &connector{delay: delay}
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
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.delay > 0 {
		time.Sleep(c.delay)
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
