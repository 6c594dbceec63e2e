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
// closed the pool; none may hang: it runs in a synctest bubble, where a
// check-out that nothing will serve blocks the bubble, which fails the test
// at once, and every check-out has a deadline on the bubble's clock (the
// backoffs after the failed establishments pass without real time), whose
// end the scenario reports as an error.
func callbackScenario(t *testing.T, p *pool.Pool, f *fakeConnector) error {
	const limit = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	p.Ready()

	// A check-out served by an establishment, then one served by a check-in.
	c1, err := p.CheckOut(ctx)
	if err == nil {
		waiter := checkOutAsync(ctx, p)
		synctest.Wait() // it waits in the queue, or failed: the pool is closed
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

// Every event handler may call Ready, Clear, Close and Stats on the pool, as
// WithEventHandler promises, and the establish-error handler all of them but
// Close (which waits for the establishment it runs on, as
// WithEstablishErrorHandler says): for each event type and each call, a
// handler makes the call the first time it sees the event, and the scenario
// must run to its end without a deadlock. When the call was Close, the pool
// ends closed and Close returned.
func TestHandlersMayCallThePool(t *testing.T) {
	types := []string{"establishError"}
	for ty := pool.PoolCreated; ty <= pool.ConnectionCheckedIn; ty++ {
		types = append(types, ty.String())
	}
	for _, on := range types {
		for _, act := range callbackActions {
			if on == "establishError" && act.name == "Close" {
				continue
			}
			t.Run(on+"->"+act.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { handlerCallsThePool(t, on, act) })
			})
		}
	}
}

// handlerCallsThePool runs the scenario with a handler of the events named
// on that makes act's call, in a synctest bubble.
func handlerCallsThePool(t *testing.T, on string, act callbackAction) {
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
		<-ready // PoolCreated may be delivered before New returns
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
		pool.WithEventHandler(func(e pool.Event) { trigger(e.Type.String()) }),
		pool.WithEstablishErrorHandler(func(error) { trigger("establishError") }))
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	if err := callbackScenario(t, p, f); err != nil {
		t.Fatal(err)
	}
	p.Close()
	// The call may still be running in a handler: the events are
	// delivered after Close.
	if err := flush(p); err != nil {
		t.Fatalf("the events after Close: %v", err)
	}
	if !fired.Load() {
		t.Fatalf("the scenario emitted no %s", on)
	}
	if calls.Load() != 1 {
		t.Fatalf("the handler's call did not return")
	}
	if s := p.Stats(); s.State != "closed" {
		t.Fatalf("state %q after Close", s.State)
	}
}

// A handler of PoolCleared that marks the pool ready again, and one of
// PoolReady that clears it, see the events in the order of the state changes
// they report, every handler seeing every event in the same order: the
// handler's own call does not cut in, its events come after the one being
// delivered.
func TestReentrantEventsKeepTheirOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		p.Ready()
		synctest.Wait() // the handlers' calls are made
		closePool(t, p)
		want := []string{"ConnectionPoolCreated", "ConnectionPoolReady", "ConnectionPoolCleared", "ConnectionPoolReady", "ConnectionPoolClosed"}
		if !slices.Equal(first, want) || !slices.Equal(second, want) {
			t.Fatalf("first handler saw %v\nsecond saw %v\nwant %v", first, second, want)
		}
	})
}

// Close does not wait for the handlers: it returns while a handler is stuck
// on the PoolClosed event, and so does a second Close; a third one, made by
// that handler itself, returns too. The delivery goroutine ends once the
// handler returns (the bubble's end checks that nothing is left).
func TestCloseDoesNotWaitForTheHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan struct{})
		handlerClosed := make(chan struct{})
		var p *pool.Pool
		p, err := pool.New("127.0.0.1:27017", &fakeConnector{},
			pool.WithEventHandler(func(e pool.Event) {
				if e.Type == pool.PoolClosed {
					close(entered)
					<-release
					p.Close() // re-entrant: must not wait for itself
					close(handlerClosed)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		within(t, hangLimit, func() { p.Close() })
		recv(t, entered, "the PoolClosed event")
		within(t, hangLimit, func() { p.Close() })
		close(release)
		recv(t, handlerClosed, "the handler's Close")
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
	// Handlers run on a goroutine of the pool's: the example waits for
	// the handler's call before it shuts the pool down, and Shutdown
	// waits for the last event.
	readied := make(chan struct{})
	var p *pool.Pool
	p, _ = pool.New("127.0.0.1:27017", pool.ConnectorFunc(func(context.Context, *pool.Attempt) (pool.Link, error) {
		return nil, errors.New("no server in this example")
	}), pool.WithEventHandler(func(e pool.Event) {
		fmt.Println(e.Type)
		if e.Type == pool.PoolCleared {
			p.Ready()
			close(readied)
		}
	}))
	p.Ready()
	p.Clear(pool.ClearOptions{})
	<-readied
	p.Shutdown(context.Background())
	// Output:
	// ConnectionPoolCreated
	// ConnectionPoolReady
	// ConnectionPoolCleared
	// ConnectionPoolReady
	// ConnectionPoolClosed
}

// A caller in a loop on the only processor does not starve the handlers:
// every event of 300,000 check-outs and check-ins reaches them, none is
// dropped. (Before a crowded queue made the pool's calls yield, the handlers
// ran only when the scheduler preempted the caller, and most events were
// dropped.)
func TestHandlersKeepUpWithACallerOnTheOnlyProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var heard atomic.Int64
	p := readyPool(t, pool.WithEventHandler(func(pool.Event) { heard.Add(1) }))
	warm(t, p, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := heard.Load()
	const n = 300_000
	for range n {
		c, err := p.CheckOut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.CheckIn(c)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("the handlers did not catch up: %v", err)
	}
	if d, got := p.Stats().EventsDropped, heard.Load()-before; d != 0 || got != 3*n {
		t.Fatalf("the handler heard %d events, %d were dropped; want all %d (3 per check-out and check-in)", got, d, 3*n)
	}
}
