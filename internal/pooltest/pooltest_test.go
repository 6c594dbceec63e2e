package pooltest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/internal/pooltest"
	"github.com/mongopool/mongopool/pool"
)

// TestMain fails the run if a goroutine outlives the tests: every pool is
// closed, and a held establishment ends with its pool.
func TestMain(m *testing.M) { leakcheck.Main(m) }

const address = "127.0.0.1:27017"

// recorder is a testing.TB whose failures are recorded rather than reported,
// to see the helpers fail a test. Only the methods below may be called;
// Error may be called from any goroutine.
type recorder struct {
	testing.TB
	failure  string
	err      error // the error Fatal was given, if any
	cleanups []func()

	mu     sync.Mutex
	errors []string // what Error was given
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Fatal(args ...any) {
	r.failure = fmt.Sprint(args...)
	if len(args) == 1 {
		r.err, _ = args[0].(error)
	}
	runtime.Goexit()
}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
}

// errorsLogged returns what Error was given.
func (r *recorder) errorsLogged() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errors)
}

// run calls f with a recorder on a goroutine of its own, as Fatal ends it,
// then runs the cleanups f registered, and returns the recorder.
func run(f func(testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r
}

// A pool of a zero Connector is ready, hands out connections established at
// once that stay fit for reuse, and is closed when the test ends.
func TestReadyPoolAndCheckOut(t *testing.T) {
	var p *pool.Pool
	r := run(func(t testing.TB) {
		p = pooltest.ReadyPool(t, address, &pooltest.Connector{}, pool.WithMaxPoolSize(2))
		if s := p.Stats(); s.State != "ready" || s.MaxPoolSize != 2 {
			t.Fatal(fmt.Sprintf("a new pool: state %q, maxPoolSize %d; want ready, 2", s.State, s.MaxPoolSize))
		}
		c := pooltest.CheckOut(t, p)
		if err := p.CheckIn(c); err != nil {
			t.Fatal(err)
		}
		if s := p.Stats(); s.Created != 1 || s.Available != 1 || s.Closed != 0 {
			t.Fatal(fmt.Sprintf("after a check-out and check-in: %+v; want one idle connection", s))
		}
	})
	if r.failure != "" {
		t.Fatal(r.failure)
	}
	if s := p.Stats(); s.State != "closed" {
		t.Fatalf("the pool is %s after the test ended, want closed", s.State)
	}
}

// ReadyPool and CheckOut fail the test, with the pool's error, when they
// cannot do what they say.
func TestHelpersFail(t *testing.T) {
	bad := pool.WithMaxConnecting(0)
	if _, err := pool.New(address, &pooltest.Connector{}, bad); err == nil {
		t.Fatal("the pool accepts maxConnecting 0: the test needs an option it refuses")
	}
	r := run(func(t testing.TB) { pooltest.ReadyPool(t, address, &pooltest.Connector{}, bad) })
	if !strings.Contains(r.failure, "maxConnecting") {
		t.Errorf("ReadyPool with maxConnecting 0: failure %q, want the pool's error", r.failure)
	}

	p := pooltest.ReadyPool(t, address, &pooltest.Connector{})
	p.Close()
	r = run(func(t testing.TB) { pooltest.CheckOut(t, p) })
	var closed *pool.PoolClosedError
	if !errors.As(r.err, &closed) {
		t.Errorf("CheckOut of a closed pool: failure %q, want the pool's PoolClosedError", r.failure)
	}
}

// TimeOut makes one check-out fail for its context, which the pool counts as
// a timeout, and does not fail the test.
func TestTimeOut(t *testing.T) {
	p := pooltest.ReadyPool(t, address, &pooltest.Connector{})
	r := run(func(t testing.TB) { pooltest.TimeOut(t, p) })
	if r.failure != "" {
		t.Fatal(r.failure)
	}
	if s := p.Stats(); s.Timeouts != 1 || s.CheckOutFailed != 1 || s.CheckedOut != 0 {
		t.Fatalf("after TimeOut: %d timeouts, %d failed, %d checked out; want 1, 1, 0", s.Timeouts, s.CheckOutFailed, s.CheckedOut)
	}
}

// An establishment takes Delay exactly, on the fake clock of a synctest
// bubble, and less when the pool cancels it.
func TestDelay(t *testing.T) {
	// Less than HangLimit, which bounds CheckOut, and than the establishment
	// timeout.
	const delay = 3 * time.Second
	synctest.Test(t, func(t *testing.T) {
		p := pooltest.ReadyPool(t, address, &pooltest.Connector{Delay: delay})
		start := time.Now()
		p.CheckIn(pooltest.CheckOut(t, p))
		if took := time.Since(start); took != delay {
			t.Fatalf("an establishment took %v, want %v", took, delay)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		p := pooltest.ReadyPool(t, address, &pooltest.Connector{Delay: delay})
		start := time.Now()
		failed := make(chan error, 1)
		go func() {
			_, err := p.CheckOut(context.Background())
			failed <- err
		}()
		synctest.Wait() // the establishment is under way
		p.Close()
		if took := time.Since(start); took != 0 {
			t.Errorf("Close waited %v for an establishment it canceled", took)
		}
		if err := <-failed; err == nil {
			t.Error("a check-out succeeded although its establishment was canceled")
		}
	})
}

// Hold keeps the establishments that start after it waiting, tells of each on
// Held, and lets them go on at Release; those that start after Release go at
// once. A synctest bubble makes "still waiting" a fact rather than a guess,
// and an establishment that never comes or never ends a deadlock that fails
// the test at once.
func TestHoldRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conns := &pooltest.Connector{}
		p := pooltest.ReadyPool(t, address, conns)
		first := pooltest.CheckOut(t, p) // before Hold: at once

		conns.Hold()
		conns.Hold() // again: the same gate
		results := make(chan *pool.Conn, 1)
		go func() {
			c, err := p.CheckOut(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- c
		}()
		<-conns.Held()
		synctest.Wait()
		select {
		case <-results:
			t.Fatal("a check-out got a connection whose establishment was held")
		default:
		}
		if s := p.Stats(); s.Pending != 1 || s.Waiting != 1 {
			t.Fatalf("while held: %d pending, %d waiting; want 1, 1", s.Pending, s.Waiting)
		}

		conns.Release()
		conns.Release() // again: nothing more to release
		second := <-results
		third := pooltest.CheckOut(t, p) // after Release: at once
		for _, c := range []*pool.Conn{first, second, third} {
			p.CheckIn(c)
		}
		if s := p.Stats(); s.Created != 3 || s.Available != 3 {
			t.Fatalf("after the gate: %+v; want three idle connections", s)
		}
	})
}

// An establishment released before the test receives from Held goes on, and
// one the pool cancels while held ends.
func TestHoldUnobserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conns := &pooltest.Connector{}
		p := pooltest.ReadyPool(t, address, conns)
		conns.Hold()
		results := make(chan error, 1)
		checkOut := func() {
			c, err := p.CheckOut(context.Background())
			if err == nil {
				p.CheckIn(c)
			}
			results <- err
		}
		go checkOut()
		synctest.Wait() // the establishment waits at the gate, untold
		conns.Release()
		if err := <-results; err != nil {
			t.Fatalf("a check-out released before Held was read: %v", err)
		}

		conns.Hold()
		c := pooltest.CheckOut(t, p) // the idle connection: no establishment
		go checkOut()
		<-conns.Held()
		p.Close()
		if err := <-results; err == nil {
			t.Fatal("a check-out succeeded although its held establishment was canceled")
		}
		p.CheckIn(c)
	})
}

// watcher is a pooltest.Watcher that counts the pools it is given and fails
// the test when Busy removes a pool it did not add, or adds one twice.
type watcher struct {
	t   *testing.T
	err error // what Add returns

	mu      sync.Mutex
	watched map[*pool.Pool]string
	seen    []*pool.Pool // every pool added, in order
	names   []string
	removed int
	// onRemove, if not nil, is called at each Remove, outside mu.
	onRemove func()
}

func (w *watcher) Add(p *pool.Pool, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, ok := w.watched[p]; ok {
		w.t.Errorf("pool %s added twice", name)
	}
	if w.watched == nil {
		w.watched = map[*pool.Pool]string{}
	}
	w.watched[p] = name
	w.seen = append(w.seen, p)
	w.names = append(w.names, name)
	return nil
}

func (w *watcher) Remove(p *pool.Pool) bool {
	w.mu.Lock()
	_, ok := w.watched[p]
	delete(w.watched, p)
	if ok {
		w.removed++
	}
	onRemove := w.onRemove
	w.mu.Unlock()
	if onRemove != nil {
		onRemove()
	}
	return ok
}

// counts returns how many pools were added and removed.
func (w *watcher) counts() (added, removed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), w.removed
}

// Busy checks connections out of the pool and in, every TimeoutEvery-th
// check-out (the first of each worker included) one that the pool counts as
// a timeout, while pools come and go in the watcher, each closed once
// removed. It calls observe until all of that is done, the last time after
// it, and returns once every goroutine it started has ended.
func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		load     pooltest.Load
		timeouts int64
	}{
		{"no timeouts", pooltest.Load{Workers: 3, Rounds: 50}, 0},
		{"a timeout every 10", pooltest.Load{Workers: 3, Rounds: 50, TimeoutEvery: 10}, 3 * 5},
		{"every one a timeout", pooltest.Load{Workers: 2, Rounds: 7, TimeoutEvery: 1}, 2 * 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pooltest.ReadyPool(t, address, &pooltest.Connector{}, pool.WithMaxPoolSize(2))
			w := &watcher{t: t}
			observed := 0
			var last pool.Stats
			var lastAdded, lastRemoved int
			r := run(func(rt testing.TB) {
				pooltest.Busy(rt, p, w, tc.load, func() {
					observed++
					last = p.Stats()
					lastAdded, lastRemoved = w.counts()
				})
			})
			if r.failure != "" || len(r.errorsLogged()) != 0 {
				t.Fatalf("Busy failed: %q %q", r.failure, r.errorsLogged())
			}
			all := int64(tc.load.Workers * tc.load.Rounds)
			if s := p.Stats(); s.CheckedOut != all-tc.timeouts || s.Timeouts != tc.timeouts || s.CheckOutFailed != tc.timeouts || s.CheckedIn != s.CheckedOut {
				t.Errorf("stats after Busy: %d checked out, %d in, %d failed, %d timeouts; want %d, %d, %d, %d",
					s.CheckedOut, s.CheckedIn, s.CheckOutFailed, s.Timeouts, all-tc.timeouts, all-tc.timeouts, tc.timeouts, tc.timeouts)
			}
			if observed == 0 || last.CheckedOut+last.CheckOutFailed != all || last.InUse != 0 || lastAdded != tc.load.Rounds || lastRemoved != tc.load.Rounds {
				t.Errorf("the last of %d observations saw %d check-outs (%d in use), %d pools added, %d removed; want all %d done, %d pools",
					observed, last.CheckedOut+last.CheckOutFailed, last.InUse, lastAdded, lastRemoved, all, tc.load.Rounds)
			}
			for i, q := range w.seen {
				if s := q.Stats(); s.State != "closed" || w.names[i] != fmt.Sprint("transient-", i) {
					t.Errorf("pool %d that came and went: %q, %s; want transient-%d, closed", i, w.names[i], s.State, i)
				}
			}
		})
	}
}

// Busy reports with Error what goes wrong on its goroutines (a check-out
// that fails, a pool the watcher refuses) and still returns.
func TestBusyReportsFailures(t *testing.T) {
	closed := pooltest.ReadyPool(t, address, &pooltest.Connector{})
	closed.Close()
	r := run(func(rt testing.TB) {
		pooltest.Busy(rt, closed, &watcher{t: t}, pooltest.Load{Workers: 2, Rounds: 3}, func() {})
	})
	if got := r.errorsLogged(); len(got) != 2 || !strings.Contains(got[0], "closed") {
		t.Errorf("Busy on a closed pool, two workers: errors %q; want one each, naming the closed pool", got)
	}

	refused := errors.New("no more pools")
	p := pooltest.ReadyPool(t, address, &pooltest.Connector{})
	r = run(func(rt testing.TB) {
		pooltest.Busy(rt, p, &watcher{t: t, err: refused}, pooltest.Load{Workers: 1, Rounds: 3}, func() {})
	})
	if got := r.errorsLogged(); len(got) != 3 || got[0] != refused.Error() {
		t.Errorf("Busy with a watcher that refuses pools: errors %q; want %q for each of 3", got, refused)
	}
}

// Busy waits for its goroutines even when observe ends the test: none is
// left to use the pool once the test's cleanups close it. In a synctest
// bubble, the pools that come and go take a millisecond each to remove, so
// Busy, returning, has waited for all of them, exactly.
func TestBusyWaitsWhenObserveFails(t *testing.T) {
	const rounds = 20
	synctest.Test(t, func(t *testing.T) {
		p := pooltest.ReadyPool(t, address, &pooltest.Connector{})
		w := &watcher{t: t, onRemove: func() { time.Sleep(time.Millisecond) }}
		start := time.Now()
		r := run(func(rt testing.TB) {
			pooltest.Busy(rt, p, w, pooltest.Load{Workers: 2, Rounds: rounds}, func() { rt.Fatal("seen enough") })
		})
		if r.failure != "seen enough" {
			t.Fatalf("failure %q, want observe's", r.failure)
		}
		if took, want := time.Since(start), rounds*time.Millisecond; took != want {
			t.Errorf("Busy returned after %v, want %v: once all the pools had come and gone", took, want)
		}
		if added, removed := w.counts(); added != rounds || removed != rounds {
			t.Errorf("when Busy returned: %d pools added, %d removed; want %d", added, removed, rounds)
		}
		if s := p.Stats(); s.CheckedOut != 2*rounds || s.InUse != 0 {
			t.Errorf("when Busy returned: %d check-outs, %d in use; want %d, 0", s.CheckedOut, s.InUse, 2*rounds)
		}
	})
}
