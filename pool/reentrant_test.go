package pool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// callbackAction is what a re-entrant event handler does with the pool.
type callbackAction struct {
	name string
	do   func(p *pool.Pool)
}

var callbackActions = []callbackAction{
	{"Ready", func(p *pool.Pool) { p.Ready() }},
	{"Clear", func(p *pool.Pool) { p.Clear(pool.ClearOptions{Cause: errors.New("cleared by a handler")}) }},
	{"ClearInterrupt", func(p *pool.Pool) {
		p.Clear(pool.ClearOptions{Cause: errors.New("cleared by a handler"), InterruptInUse: true})
	}},
	{"Close", func(p *pool.Pool) { p.Close() }},
	{"Stats", func(p *pool.Pool) { p.Stats() }},
}

// callbackScenario drives a pool through every event the pool has, including
// waiting check-outs served by a check-in and by an establishment, a failed
// establishment, idle connections closed by the maintenance and by Close, and
// a clear that interrupts a connection in use. Steps may fail once a handler
// closed the pool; none may hang: every check-out has a deadline, and the
// scenario returns an error if one of them was reached.
func callbackScenario(t *testing.T, p *pool.Pool, f *fakeConnector) error {
	const limit = hangLimit / 2
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	p.Ready()

	// A check-out served by an establishment, then one served by a check-in.
	c1, err := p.CheckOut(ctx)
	if err == nil {
		waiter := checkOutAsync(ctx, p)
		awaitWaiting(t, p)
		p.CheckIn(c1)
		if r := <-waiter; r.err == nil {
			p.CheckIn(r.c)
		}
	}

	// A clear: the idle connection, now stale, is closed by the maintenance
	// or the next check-out, and the establishments that follow fail (the
	// establish-error handler sees them) until the connector is fixed.
	p.Clear(pool.ClearOptions{Cause: errors.New("scenario clear")})
	f.set(func(f *fakeConnector) { f.FailBeforeHello = errors.New("scenario: connection refused") })
	p.Ready()
	if c, err := p.CheckOut(ctx); err == nil {
		p.CheckIn(c)
	}
	f.set(func(f *fakeConnector) { f.FailBeforeHello = nil })

	// A connection in use interrupted by a clear, and a connection idle when
	// the pool closes.
	if c, err := p.CheckOut(ctx); err == nil {
		p.Clear(pool.ClearOptions{Cause: errors.New("scenario interrupt"), InterruptInUse: true})
		p.CheckIn(c)
	}
	p.Ready()
	if c, err := p.CheckOut(ctx); err == nil {
		p.CheckIn(c)
	}
	p.Close()
	if ctx.Err() != nil {
		return fmt.Errorf("a check-out of the scenario was still waiting after %v", limit)
	}
	return nil
}

// awaitWaiting waits until a check-out waits in the pool's queue, or the pool
// is no longer ready (a handler closed or cleared it: the check-out failed).
func awaitWaiting(t *testing.T, p *pool.Pool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := p.Stats()
		if s.Waiting > 0 || s.State != "ready" || time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
}

// Every event handler (and the establish-error handler) may call Ready,
// Clear, Close and Stats on the pool, as WithEventHandler promises: for each
// event type and each call, a handler makes the call the first time it sees
// the event, and the scenario must run to its end without a deadlock. When
// the call was Close, the pool ends closed and Close returned.
func TestHandlersMayCallThePool(t *testing.T) {
	types := []string{"establishError"}
	for ty := pool.PoolCreated; ty <= pool.ConnectionCheckedIn; ty++ {
		types = append(types, ty.String())
	}
	// A case that hangs leaves goroutines stuck, and every later case would
	// wait out its limit too: the cases after it are not run.
	var stuck atomic.Bool
	bounded := func(t *testing.T, d time.Duration, fn func()) {
		t.Helper()
		stuck.Store(true) // still true if within ends the case
		within(t, d, fn)
		stuck.Store(false)
	}
	for _, on := range types {
		for _, act := range callbackActions {
			if stuck.Load() {
				t.Fatal("a case hung: the cases after it were not run")
			}
			t.Run(on+"->"+act.name, func(t *testing.T) {
				var (
					p     *pool.Pool
					ready = make(chan struct{})
					fired atomic.Bool
					calls atomic.Int32
				)
				trigger := func(what string) {
					if what != on || !fired.CompareAndSwap(false, true) {
						return
					}
					<-ready // PoolCreated comes before New returns
					act.do(p)
					calls.Add(1)
				}
				f := &fakeConnector{}
				var err error
				p, err = pool.New("127.0.0.1:27017", f,
					pool.WithMaxPoolSize(1),
					pool.WithMinPoolSize(1),
					pool.WithMaxIdleTime(time.Hour),
					pool.WithMaintenanceInterval(time.Millisecond),
					pool.WithEventHandler(func(e pool.Event) {
						if e.Type != pool.PoolCreated {
							trigger(e.Type.String())
						}
					}),
					pool.WithEstablishErrorHandler(func(error) { trigger("establishError") }))
				if err != nil {
					t.Fatal(err)
				}
				close(ready)
				var scenarioErr error
				bounded(t, hangLimit, func() {
					if on == pool.PoolCreated.String() {
						// Delivered before New returned: make the call
						// here, as a handler of it would have.
						fired.Store(true)
						act.do(p)
						calls.Add(1)
					}
					scenarioErr = callbackScenario(t, p, f)
				})
				if scenarioErr != nil {
					stuck.Store(true)
					t.Fatal(scenarioErr)
				}
				if !fired.Load() {
					t.Fatalf("the scenario emitted no %s", on)
				}
				bounded(t, hangLimit, func() {
					// The call may still be running in a handler on a
					// goroutine of the pool's; Close waits for those.
					p.Close()
				})
				if calls.Load() != 1 {
					t.Fatalf("the handler's call did not return")
				}
				if s := p.Stats(); s.State != "closed" {
					t.Fatalf("state %q after Close", s.State)
				}
			})
		}
	}
}

// A handler of PoolCleared that marks the pool ready again, and one of
// PoolReady that clears it, see the events in the order of the state changes
// they report, every handler seeing every event in the same order: the
// handler's own call does not cut in.
func TestReentrantEventsKeepTheirOrder(t *testing.T) {
	var mu sync.Mutex
	var first, second []string
	var p *pool.Pool
	var rounds atomic.Int32
	p, err := pool.New("127.0.0.1:27017", &fakeConnector{},
		pool.WithMaintenanceInterval(-1),
		pool.WithEventHandler(func(e pool.Event) {
			mu.Lock()
			first = append(first, e.Type.String())
			mu.Unlock()
			switch e.Type {
			case pool.PoolCleared:
				p.Ready()
			case pool.PoolReady:
				if rounds.Add(1) == 1 {
					p.Clear(pool.ClearOptions{})
				}
			}
		}),
		pool.WithEventHandler(func(e pool.Event) {
			mu.Lock()
			second = append(second, e.Type.String())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	within(t, hangLimit, func() {
		p.Ready()
		p.Close()
	})
	want := []string{"ConnectionPoolCreated", "ConnectionPoolReady", "ConnectionPoolCleared", "ConnectionPoolReady", "ConnectionPoolClosed"}
	if !slices.Equal(first, want) || !slices.Equal(second, want) {
		t.Fatalf("first handler saw %v\nsecond saw %v\nwant %v", first, second, want)
	}
}

// A second Close, while the first is still delivering the PoolClosed event,
// does not return before the first has finished; a third one, made by the
// PoolClosed handler itself, returns at once rather than wait for itself.
func TestConcurrentCloseWaitsForTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan struct{})
		var p *pool.Pool
		p, err := pool.New("127.0.0.1:27017", &fakeConnector{},
			pool.WithEventHandler(func(e pool.Event) {
				if e.Type == pool.PoolClosed {
					close(entered)
					<-release
					p.Close() // re-entrant: must not wait for itself
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		var firstDone, secondDone atomic.Bool
		go func() { p.Close(); firstDone.Store(true) }()
		recv(t, entered, "the PoolClosed event")
		go func() { p.Close(); secondDone.Store(true) }()
		synctest.Wait()
		if secondDone.Load() {
			t.Fatal("the second Close returned while the first was still closing the pool")
		}
		close(release)
		synctest.Wait()
		if !firstDone.Load() || !secondDone.Load() {
			t.Fatalf("first Close done %v, second %v", firstDone.Load(), secondDone.Load())
		}
	})
}

// A check-out waiting in the queue when its connection is handed over by an
// establishment whose ConnectionCheckedOut handler closes the pool returns
// with that connection, and nothing hangs.
func TestCheckedOutHandlerClosesThePool(t *testing.T) {
	block := make(chan struct{})
	f := &fakeConnector{Block: block}
	var p *pool.Pool
	var once sync.Once
	p, err := pool.New("127.0.0.1:27017", f, pool.WithEventHandler(func(e pool.Event) {
		if e.Type == pool.ConnectionCheckedOut {
			once.Do(func() { p.Close() })
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, p)
	within(t, hangLimit, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got := checkOutAsync(ctx, p)
		awaitWaiting(t, p)
		close(block)
		r := <-got
		if r.err != nil {
			t.Errorf("check-out: %v, want the connection established for it", r.err)
		} else if err := p.CheckIn(r.c); err != nil {
			t.Errorf("check-in after Close: %v", err)
		}
		p.Close()
	})
	if s := p.Stats(); s.State != "closed" || s.Total != 0 {
		t.Fatalf("stats after Close: %+v", s)
	}
	if n := f.openLinks(); n != 0 {
		t.Fatalf("%d links left open", n)
	}
}

func ExampleWithEventHandler_reentrant() {
	// A handler may call the pool: this one marks the pool ready again
	// after every clear (a topology layer would check the server first).
	var p *pool.Pool
	p, _ = pool.New("127.0.0.1:27017", pool.ConnectorFunc(func(context.Context, *pool.Attempt) (pool.Link, error) {
		return nil, errors.New("no server in this example")
	}), pool.WithEventHandler(func(e pool.Event) {
		fmt.Println(e.Type)
		if e.Type == pool.PoolCleared {
			p.Ready()
		}
	}))
	p.Ready()
	p.Clear(pool.ClearOptions{})
	p.Close()
	// Output:
	// ConnectionPoolCreated
	// ConnectionPoolReady
	// ConnectionPoolCleared
	// ConnectionPoolReady
	// ConnectionPoolClosed
}
