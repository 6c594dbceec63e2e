// Package pooltest holds test helpers for code that watches pools (metrics
// exporters, the dashboard): a connector that establishes connections at
// once, after a delay or when a gate lets it, the few steps such tests take
// on a pool, and the load of a test that watches a busy pool. It uses the standard library and the pool package only, and
// is for tests only: no package of the library imports it outside its
// _test.go files.
package pooltest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// HangLimit bounds the waits of the helpers, so that a regression that leaves
// a test waiting fails it in seconds with a message rather than hanging.
const HangLimit = 10 * time.Second

// Link stands for an established connection: it never breaks, and closing it
// does nothing.
type Link struct{}

// Close does nothing.
func (Link) Close() error { return nil }

// Err returns nil: the link is always fit for reuse.
func (Link) Err() error { return nil }

// A Connector establishes connections as Links, without a server. By default
// it establishes them at once; Delay makes each take that long, and Hold
// makes them wait at a gate until Release.
//
// The zero value is ready to use. A Connector must not be copied after first
// use.
type Connector struct {
	// Delay is how long each establishment takes once past the gate, as a
	// server's latency would be: exact on the fake clock of a synctest
	// bubble. The wait ends early, with the context's error, when the pool
	// cancels the establishment.
	Delay time.Duration

	mu      sync.Mutex
	release chan struct{} // closed by Release; nil while not held
	held    chan struct{} // tells of each establishment the gate holds
}

// Hold makes the establishments that start from now on wait until Release
// (or until the pool cancels them). Holding a held connector does nothing.
func (c *Connector) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.release == nil {
		c.release = make(chan struct{})
	}
}

// Release lets the held establishments go on, and the next ones go at once.
// Releasing a connector that is not held does nothing.
func (c *Connector) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.release != nil {
		close(c.release)
		c.release = nil
	}
}

// Held returns a channel that delivers one value for each establishment the
// gate holds, once it is waiting there, so that a test can tell when a
// connection is pending. An establishment released before its value is
// received goes on without delivering it.
func (c *Connector) Held() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heldLocked()
}

// heldLocked returns the channel of Held, making it on first use so that the
// zero Connector is ready; c.mu must be held.
func (c *Connector) heldLocked() chan struct{} {
	if c.held == nil {
		// Unbuffered: a value received is an establishment waiting at the
		// gate now, not one that may have gone on since.
		c.held = make(chan struct{})
	}
	return c.held
}

// Connect establishes a connection after the gate and Delay, and reports the
// hello as done; it returns ctx's error if the pool cancels it on the way.
func (c *Connector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	c.mu.Lock()
	release, held := c.release, c.heldLocked()
	c.mu.Unlock()
	if release != nil {
		select {
		case held <- struct{}{}:
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.Delay > 0 {
		t := time.NewTimer(c.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.HelloDone(pool.ServiceID{})
	return Link{}, nil
}

// ReadyPool returns a ready pool of c's connections without background
// maintenance, so that nothing but the test changes it; opts come after
// that default and may override it. The pool is closed when the test ends.
func ReadyPool(t testing.TB, address string, c pool.Connector, opts ...pool.Option) *pool.Pool {
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

// CheckOut checks a connection out of p, failing the test if it cannot
// within HangLimit.
func CheckOut(t testing.TB, p *pool.Pool) *pool.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangLimit)
	defer cancel()
	c, err := p.CheckOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TimeOut makes one check-out of p fail for its context, which is canceled
// before the check-out starts: the pool counts it as a timeout. It fails the
// test if the check-out succeeds.
func TimeOut(t testing.TB, p *pool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := p.CheckOut(ctx); err == nil {
		p.CheckIn(c)
		t.Fatal("a check-out with a canceled context succeeded")
	}
}

// A Watcher reports on the pools it is given, as the metrics exporters do.
type Watcher interface {
	// Add starts reporting p under name.
	Add(p *pool.Pool, name string) error
	// Remove stops reporting p, and reports whether it was reported.
	Remove(p *pool.Pool) bool
}

// Load is the work Busy puts on a pool.
type Load struct {
	// Workers is how many goroutines check connections out and back in.
	Workers int
	// Rounds is how many check-outs each worker makes, and how many pools
	// come and go meanwhile.
	Rounds int
	// TimeoutEvery, when above 0, makes every TimeoutEvery-th check-out of
	// each worker, its first included, one whose context is canceled before
	// it starts: the pool counts it as a timeout.
	TimeoutEvery int
}

// Busy is the drive of a test that watches a pool while it is busy: it puts
// load on p while Rounds other pools (with a Connector of their own, named
// "transient-0", "transient-1"…) are added to w, removed and closed, one
// after the other. Meanwhile it calls observe, on the calling goroutine,
// again and again, and once more when all that is done, so that the last
// observation sees p quiet.
//
// What goes wrong on the goroutines Busy starts is reported with t.Error.
// Busy returns once they have all ended, even when observe ends the test
// (with t.Fatal): none of them is left to use p once the test has closed it.
func Busy(t testing.TB, p *pool.Pool, w Watcher, load Load, observe func()) {
	t.Helper()
	var wg sync.WaitGroup
	for range load.Workers {
		wg.Go(func() { checkOutsIn(t, p, load) })
	}
	wg.Go(func() {
		for i := range load.Rounds {
			q, err := pool.New("127.0.0.1:27018", &Connector{}, pool.WithMaintenanceInterval(-1))
			if err != nil {
				t.Error(err)
				return
			}
			if err := w.Add(q, fmt.Sprint("transient-", i)); err != nil {
				t.Error(err)
			}
			w.Remove(q)
			q.Close()
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	defer func() { <-done }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		observe()
	}
}

// checkOutsIn is one worker of Busy: load.Rounds check-outs of p, each
// connection checked in at once.
func checkOutsIn(t testing.TB, p *pool.Pool, load Load) {
	ctx, cancel := context.WithTimeout(context.Background(), HangLimit)
	defer cancel()
	for i := range load.Rounds {
		if load.TimeoutEvery > 0 && i%load.TimeoutEvery == 0 {
			canceled, stop := context.WithCancel(ctx)
			stop()
			if c, err := p.CheckOut(canceled); err == nil {
				p.CheckIn(c)
			}
			continue
		}
		c, err := p.CheckOut(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		p.CheckIn(c)
	}
}
