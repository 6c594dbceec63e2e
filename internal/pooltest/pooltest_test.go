package pooltest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
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
// to see the helpers fail a test. Only the methods below may be called.
type recorder struct {
	testing.TB
	failure  string
	err      error // the error Fatal was given, if any
	cleanups []func()
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
