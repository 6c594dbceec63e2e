package pool_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// attemptLog is a Connector that fails every establishment, as a refused
// port does, and records when each was tried. Past limit attempts (a pool
// redialling without pause) it blocks until the establishment's context ends
// instead, so that a regression shows as a count above the bound rather than
// as a test that never ends: in a synctest bubble, time only moves once
// every goroutine is blocked.
type attemptLog struct {
	mu    sync.Mutex
	at    []time.Time
	limit int
	fail  error // nil: succeed
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (l *attemptLog) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	over, fail := len(l.at) > l.limit, l.fail
	l.mu.Unlock()
	if over {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail != nil {
		return nil, fail
	}
	a.HelloDone(pool.ServiceID{})
	return &fakeLink{id: a.ConnectionID()}, nil
}

// refusedPool returns a ready pool, without maintenance, whose attemptLog
// refuses every connection; the pool is closed when the test ends.
func refusedPool(t *testing.T) (*attemptLog, *pool.Pool) {
	t.Helper()
	l := &attemptLog{limit: 100, fail: errRefused}
	p, err := pool.New("127.0.0.1:27017", l, pool.WithMaintenanceInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePool(t, p) })
	mustReady(t, p)
	return l, p
}

func (l *attemptLog) times() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at...)
}

func (l *attemptLog) set(fail error) {
	l.mu.Lock()
	l.fail = fail
	l.mu.Unlock()
}

// The background population for minPoolSize against a server that refuses
// connections backs off: after the nth failure in a row it waits at least
// half of min(10s, 100ms * 2^n) before it dials again, so that two idle
// seconds cost 5 attempts at most, not thousands. Once the server answers,
// the pool fills up at once.
func TestPopulationBacksOffAfterFailures(t *testing.T) {
	for _, minSize := range []int{1, 5} {
		t.Run(fmt.Sprint("minPoolSize=", minSize), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &attemptLog{limit: 100, fail: errRefused}
				p, err := pool.New("127.0.0.1:27017", l, pool.WithMinPoolSize(minSize))
				if err != nil {
					t.Fatal(err)
				}
				defer closePool(t, p)
				start := time.Now()
				mustReady(t, p)
				time.Sleep(2 * time.Second)
				at := l.times()
				// maxConnecting (2) establishments may start together at
				// each end of a backoff.
				if most := 5 * min(minSize, 2); len(at) > most || len(at) < 2 {
					t.Fatalf("%d attempts in 2s of failures, want 2 to %d (at %v)", len(at), most, offsets(start, at))
				}
				if minSize == 1 {
					for i := 1; i < len(at); i++ {
						least := min(10*time.Second, 100*time.Millisecond<<i) / 2
						if gap := at[i].Sub(at[i-1]); gap < least {
							t.Errorf("attempt %d came %v after the one before, want at least %v (attempts at %v)", i+1, gap, least, offsets(start, at))
						}
					}
				}
				if s := p.Stats(); s.Pending != 0 || s.EstablishFailed != int64(len(at)) {
					t.Errorf("stats %+v after %d attempts", s, len(at))
				}

				l.set(nil)
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if s := p.Stats(); s.Available != minSize {
					t.Fatalf("after the server came back: %+v", s)
				}
			})
		})
	}
}

// Check-outs against a server that refuses connections, retried at once by
// ten goroutines as an impatient application would, cost a bounded number of
// attempts: each waits in the queue for the end of the backoff rather than
// dial again. A check-out that gives up meanwhile says why the pool was not
// establishing.
func TestCheckOutsWaitForTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, p := refusedPool(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var timeouts []error
		for range 10 {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := p.CheckOut(ctx)
					if err == nil {
						p.CheckIn(c)
						continue
					}
					var wqt *pool.WaitQueueTimeoutError
					if errors.As(err, &wqt) {
						mu.Lock()
						timeouts = append(timeouts, err)
						mu.Unlock()
					}
				}
			})
		}
		within(t, hangLimit, wg.Wait)
		// Two at a time (maxConnecting) at each end of a backoff: 100ms,
		// 300ms, 700ms and 1.5s after the first at the earliest.
		if n := len(l.times()); n > 10 {
			t.Fatalf("%d attempts in 2s, want 10 at most", n)
		}
		if len(timeouts) == 0 {
			t.Fatal("no check-out was waiting when the time was up")
		}
		var wqt *pool.WaitQueueTimeoutError
		errors.As(timeouts[0], &wqt)
		if wqt.EstablishFailures == 0 || !errors.Is(wqt.LastEstablishError, errRefused) {
			t.Fatalf("%v: does not tell of the failed establishments", timeouts[0])
		}
	})
}

// A clear and Ready, as SDAM does when its monitor finds the server fit
// again, end the backoff: the next check-out dials at once.
func TestReadyEndsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, p := refusedPool(t)
		for range 5 { // the backoff is now at 800ms at least
			if _, err := checkOut(t, context.Background(), p); err == nil {
				t.Fatal("a check-out succeeded against a refusing server")
			}
		}
		l.set(nil)
		must(t, p.Clear(pool.ClearOptions{}))
		mustReady(t, p)
		start := time.Now()
		c := mustCheckOut(t, p)
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the check-out after Ready waited %v", waited)
		}
		mustCheckIn(t, p, c)
	})
}

// offsets returns the first attempts' times from start, for messages.
func offsets(start time.Time, at []time.Time) []time.Duration {
	out := make([]time.Duration, min(len(at), 12))
	for i, t := range at[:len(out)] {
		out[i] = t.Sub(start)
	}
	return out
}

// A check-out that waits for the end of a backoff while the population for
// minPoolSize keeps failing gets an establishment of its own when the backoff
// ends, and its failure: the population's establishments, which do not fail a
// check-out, do not stand in for its own, again and again, while it waits
// forever.
func TestCheckOutBehindFailingPopulationFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{FailBeforeHello: errRefused}
		p, _ := newPool(t, f, pool.WithMinPoolSize(1), pool.WithMaxPoolSize(1), pool.WithMaintenanceInterval(time.Millisecond))
		mustReady(t, p)
		synctest.Wait() // the population's first attempt failed: the pool backs off
		if s := p.Stats(); s.EstablishFailed == 0 {
			t.Fatalf("stats %+v, want the population's attempt failed", s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := p.CheckOut(ctx)
		var ce *pool.ConnectionError
		if !errors.As(err, &ce) || !errors.Is(err, errRefused) {
			t.Fatalf("check-out: %v, want the refusal of the establishment made for it", err)
		}
	})
}
