package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

func TestCheckOutReusesIdleConnection(t *testing.T) {
	f := &fakeConnector{}
	p, _ := newPool(t, f)
	mustReady(t, p)
	c := mustCheckOut(t, p)
	mustCheckIn(t, p, c)
	c2 := mustCheckOut(t, p)
	if c2 != c || c2.ID() != 1 {
		t.Fatalf("second check-out got connection %d, want the idle connection 1", c2.ID())
	}
	mustCheckIn(t, p, c2)
	if n := f.started.Load(); n != 1 {
		t.Fatalf("%d establishments, want 1", n)
	}
}

func TestCheckOutFromPausedPoolIsRetryable(t *testing.T) {
	p, log := newPool(t, &fakeConnector{})
	_, err := checkOut(t, context.Background(), p)
	var pce *pool.PoolClearedError
	if !errors.As(err, &pce) || !pool.HasErrorLabel(err, pool.LabelRetryable) {
		t.Fatalf("check-out from a paused pool: %v, want a retryable PoolClearedError", err)
	}
	if e := log.all(); e[len(e)-1].Type != pool.ConnectionCheckOutFailed || e[len(e)-1].Reason != pool.ReasonConnectionError {
		t.Fatalf("last event %+v, want ConnectionCheckOutFailed(connectionError)", e[len(e)-1])
	}
}

// A check-out that gives up while waiting leaves the queue at once, and the
// connection checked in after that goes to the idle list, not to it.
func TestCancelWhileWaiting(t *testing.T) {
	p, log := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
	mustReady(t, p)
	held := mustCheckOut(t, p)

	ctx, cancel := context.WithCancel(context.Background())
	res := checkOutAsync(ctx, p)
	log.waitFor(t, pool.ConnectionCheckOutStarted, 2)
	cancel()
	r := recv(t, res, "the canceled check-out")
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, pool.ErrWaitQueueTimeout) {
		t.Fatalf("canceled check-out: %v", r.err)
	}
	if s := p.Stats(); s.Waiting != 0 {
		t.Fatalf("%d waiting after the cancel", s.Waiting)
	}
	mustCheckIn(t, p, held)
	s := p.Stats()
	if s.Available != 1 || s.InUse != 0 {
		t.Fatalf("after check-in: %+v, want the connection idle", s)
	}
	checkCounts(t, s)
}

// A check-out that gives up while its connection is being established wastes
// nothing: the establishment goes on and the pool keeps the connection.
func TestCancelWhileEstablishing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: time.Second}
		p, log := newPool(t, f)
		mustReady(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := checkOut(t, ctx, p)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("check-out: %v, want a deadline error", err)
		}
		var wqt *pool.WaitQueueTimeoutError
		if !errors.As(err, &wqt) || wqt.Limit != "context deadline" || wqt.Pending != 1 {
			t.Fatalf("timeout error %+v, want the context deadline with 1 pending", wqt)
		}
		synctest.Wait()
		if s := p.Stats(); s.Pending != 1 || s.Waiting != 0 {
			t.Fatalf("stats after the give-up: %+v", s)
		}
		log.waitFor(t, pool.ConnectionReady, 1)
		synctest.Wait()
		s := p.Stats()
		if s.Available != 1 || s.Closed != 0 {
			t.Fatalf("stats after the establishment: %+v, want one idle connection", s)
		}
		c := mustCheckOut(t, p)
		if c.ID() != 1 || f.started.Load() != 1 {
			t.Fatalf("got connection %d after %d establishments", c.ID(), f.started.Load())
		}
		mustCheckIn(t, p, c)
	})
}

// A connection checked in while a check-out waits for its own pending
// connection goes to that check-out at once.
func TestCheckedInConnectionGoesToWaiterOfPendingConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, _ := newPool(t, f, pool.WithMaxPoolSize(2))
		mustReady(t, p)
		c1 := mustCheckOut(t, p)

		block := make(chan struct{})
		f.set(func(f *fakeConnector) { f.Block = block })
		res := checkOutAsync(context.Background(), p)
		synctest.Wait()
		if s := p.Stats(); s.Pending != 1 || s.Waiting != 1 {
			t.Fatalf("stats %+v, want one check-out waiting for one establishment", s)
		}
		mustCheckIn(t, p, c1)
		r := recv(t, res, "the waiting check-out")
		if r.err != nil || r.c.ID() != 1 {
			t.Fatalf("waiter got %v, %v; want connection 1", r.c, r.err)
		}
		close(block)
		synctest.Wait()
		mustCheckIn(t, p, r.c)
		// Connection 2 arrived with nobody waiting: it went idle.
		s := p.Stats()
		if s.Available != 2 || s.Pending != 0 {
			t.Fatalf("stats %+v, want both connections idle", s)
		}
		checkCounts(t, s)
	})
}

// waitQueueTimeoutMS limits the wait in the queue, not the establishment of a
// check-out's own connection; timeoutMS limits both.
func TestWaitQueueTimeoutExemptsEstablishingCheckOuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: 750 * time.Millisecond}
		p, log := newPool(t, f, pool.WithMaxPoolSize(10), pool.WithWaitQueueTimeout(50*time.Millisecond))
		mustReady(t, p)
		r1 := checkOutAsync(context.Background(), p)
		r2 := checkOutAsync(context.Background(), p)
		log.waitFor(t, pool.ConnectionCreated, 2)
		r3 := checkOutAsync(context.Background(), p) // maxConnecting is reached: it queues
		got := recv(t, r3, "the queued check-out")
		var wqt *pool.WaitQueueTimeoutError
		if !errors.As(got.err, &wqt) || wqt.Limit != "waitQueueTimeoutMS" {
			t.Fatalf("third check-out: %v, want a waitQueueTimeoutMS timeout", got.err)
		}
		for _, r := range []<-chan result{r1, r2} {
			got := recv(t, r, "an establishing check-out")
			if got.err != nil {
				t.Fatalf("establishing check-out failed: %v", got.err)
			}
			mustCheckIn(t, p, got.c)
		}
	})
}

func TestTimeoutMSLimitsEstablishment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: time.Second}
		p, _ := newPool(t, f, pool.WithTimeout(100*time.Millisecond))
		mustReady(t, p)
		start := time.Now()
		_, err := checkOut(t, context.Background(), p)
		var wqt *pool.WaitQueueTimeoutError
		if !errors.As(err, &wqt) || wqt.Limit != "timeoutMS" || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("check-out: %v, want a timeoutMS timeout", err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("gave up after %v, want 100ms", d)
		}
		if s := p.Stats(); s.Timeouts != 1 || s.Pending != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// The earliest of the context deadline, waitQueueTimeoutMS and timeoutMS
// wins.
func TestEarliestLimitWins(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ctx, wq, to time.Duration
		want        string
	}{
		{"context", 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, "context deadline"},
		{"waitQueue", 30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, "waitQueueTimeoutMS"},
		{"timeoutMS", 30 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond, "timeoutMS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1),
					pool.WithWaitQueueTimeout(tc.wq), pool.WithTimeout(tc.to))
				mustReady(t, p)
				held := mustCheckOut(t, p)
				defer p.CheckIn(held)
				ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
				defer cancel()
				start := time.Now()
				_, err := checkOut(t, ctx, p)
				var wqt *pool.WaitQueueTimeoutError
				if !errors.As(err, &wqt) || wqt.Limit != tc.want {
					t.Fatalf("check-out: %v, want limit %s", err, tc.want)
				}
				if d := time.Since(start); d != 10*time.Millisecond {
					t.Fatalf("gave up after %v, want 10ms", d)
				}
			})
		})
	}
}

func TestMaxConnectingEnforced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: 10 * time.Millisecond}
		p, _ := newPool(t, f, pool.WithMaxPoolSize(50), pool.WithMaxConnecting(3))
		mustReady(t, p)
		var rs []<-chan result
		for range 20 {
			rs = append(rs, checkOutAsync(context.Background(), p))
		}
		synctest.Wait()
		if s := p.Stats(); s.Pending != 3 || s.Waiting != 20 {
			t.Fatalf("stats %+v, want 3 pending and 20 waiting", s)
		}
		var conns []*pool.Conn
		for _, r := range rs {
			got := recv(t, r, "a queued check-out")
			if got.err != nil {
				t.Fatal(got.err)
			}
			conns = append(conns, got.c)
		}
		if peak := f.peak.Load(); peak != 3 {
			t.Fatalf("%d establishments at once, want maxConnecting = 3", peak)
		}
		for _, c := range conns {
			mustCheckIn(t, p, c)
		}
		checkCounts(t, p.Stats())
	})
}

func TestMaxPoolSizeEnforced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, log := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(3))
		mustReady(t, p)
		var conns []*pool.Conn
		for range 3 {
			conns = append(conns, mustCheckOut(t, p))
		}
		r := checkOutAsync(context.Background(), p)
		synctest.Wait()
		if s := p.Stats(); s.Total != 3 || s.Waiting != 1 {
			t.Fatalf("stats %+v, want 3 connections and 1 waiting", s)
		}
		mustCheckIn(t, p, conns[1])
		got := recv(t, r, "the waiting check-out")
		if got.err != nil || got.c != conns[1] {
			t.Fatalf("waiter got %v, %v", got.c, got.err)
		}
		conns[1] = got.c
		for _, c := range conns {
			mustCheckIn(t, p, c)
		}
		if n := log.count(pool.ConnectionCreated); n != 3 {
			t.Fatalf("%d connections created, want 3", n)
		}
	})
}

// Check-outs are served in the order they arrived.
func TestWaitQueueIsFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		const n = 20
		order := make(chan int, n)
		for i := range n {
			go func() {
				c, err := p.CheckOut(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				order <- i
				p.CheckIn(c)
			}()
			synctest.Wait() // goroutine i is queued before i+1 starts
		}
		mustCheckIn(t, p, c)
		for want := range n {
			if got := recv(t, order, "the next check-out served"); got != want {
				t.Fatalf("check-out %d served in position %d", got, want)
			}
		}
	})
}

func TestDoChecksInAndReportsErrors(t *testing.T) {
	p, _ := newPool(t, &fakeConnector{})
	mustReady(t, p)
	boom := errors.New("boom")
	if err := do(t, context.Background(), p, func(*pool.Conn) error { return boom }); err != boom {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	if err := do(t, context.Background(), p, func(*pool.Conn) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.InUse != 0 || s.Available != 1 || s.CheckedIn != 2 {
		t.Fatalf("stats %+v, want the connection back and idle", s)
	}
}

func TestDoClosesConnectionOnPanic(t *testing.T) {
	f := &fakeConnector{}
	p, log := newPool(t, f)
	mustReady(t, p)
	var recovered any
	within(t, hangLimit, func() {
		defer func() { recovered = recover() }()
		p.Do(context.Background(), func(*pool.Conn) error { panic("kaboom") })
	})
	if recovered != "kaboom" {
		t.Fatalf("recovered %v, want the panic to go on", recovered)
	}
	s := p.Stats()
	if s.InUse != 0 || s.Total != 0 || s.ClosedError != 1 {
		t.Fatalf("stats %+v, want the connection closed with reason error", s)
	}
	log.waitFor(t, pool.ConnectionClosed, 1)
}

// A connection whose link reports an error is closed at check-in.
func TestErroredConnectionClosedAtCheckIn(t *testing.T) {
	f := &fakeConnector{}
	p, log := newPool(t, f)
	mustReady(t, p)
	c := mustCheckOut(t, p)
	broken := errors.New("connection reset by peer")
	c.Link().(*fakeLink).fail(broken)
	mustCheckIn(t, p, c)
	ev := log.all()
	last := ev[len(ev)-1]
	if last.Type != pool.ConnectionClosed || last.Reason != pool.ReasonError || last.Err != broken {
		t.Fatalf("last event %+v, want ConnectionClosed(error) with the link's error", last)
	}
	if p.Stats().Total != 0 {
		t.Fatal("errored connection still counted")
	}
}

// A check-out that closes a perished idle connection on its way to a good one
// leaves the pool below minPoolSize: the maintenance makes up for it at once,
// not at its next interval.
func TestCheckOutPastPerishedRestoresMinPoolSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, _ := newPool(t, f, pool.WithMinPoolSize(2), pool.WithMaintenanceInterval(time.Hour))
		mustReady(t, p)
		synctest.Wait()
		a, b := mustCheckOut(t, p), mustCheckOut(t, p)
		mustCheckIn(t, p, a)
		mustCheckIn(t, p, b) // on top of the idle list
		b.Link().(*fakeLink).fail(errors.New("connection reset by peer"))
		if c := mustCheckOut(t, p); c != a {
			t.Fatalf("checked out connection %d, want %d past the broken one", c.ID(), a.ID())
		}
		synctest.Wait() // no time passes: the maintenance's interval is an hour
		if s := p.Stats(); s.ClosedError != 1 || s.Created != 3 || s.Total != 2 {
			t.Fatalf("stats %+v, want the broken connection closed and a third one created for minPoolSize", s)
		}
		mustCheckIn(t, p, a)
	})
}
