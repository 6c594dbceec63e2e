package pool_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// reconfigured returns the options of the PoolReconfigured events.
func reconfigured(l *evLog) []map[string]int64 {
	var out []map[string]int64
	for _, e := range l.all() {
		if e.Type == pool.PoolReconfigured {
			out = append(out, e.Options)
		}
	}
	return out
}

// A larger maxPoolSize serves the check-outs waiting for room at once.
func TestReconfigureLargerMaxPoolSizeServesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, log := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
		mustReady(t, p)
		held := mustCheckOut(t, p)
		a, b := checkOutAsync(context.Background(), p), checkOutAsync(context.Background(), p)
		synctest.Wait()
		if s := p.Stats(); s.Waiting != 2 {
			t.Fatalf("%d check-outs waiting, want 2", s.Waiting)
		}
		must(t, p.Reconfigure(pool.WithMaxPoolSize(3)))
		synctest.Wait()
		for _, ch := range []<-chan result{a, b} {
			select {
			case r := <-ch:
				must(t, r.err)
				mustCheckIn(t, p, r.c)
			default:
				t.Fatal("a waiting check-out was not served by the larger maxPoolSize")
			}
		}
		mustCheckIn(t, p, held)
		s := p.Stats()
		checkCounts(t, s)
		if s.MaxPoolSize != 3 || s.Total != 3 {
			t.Errorf("maxPoolSize %d with %d connections, want 3 and 3", s.MaxPoolSize, s.Total)
		}
		ev := reconfigured(log)
		if len(ev) != 1 || ev[0]["maxPoolSize"] != 3 || ev[0]["maxConnecting"] != 2 || ev[0]["minPoolSize"] != 0 {
			t.Errorf("PoolReconfigured options %v, want every option with maxPoolSize 3", ev)
		}
	})
}

// A larger maxConnecting starts more establishments for the waiters at once.
func TestReconfigureLargerMaxConnecting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Block: make(chan struct{})}
		p, _ := newPool(t, f, pool.WithMaxConnecting(1))
		mustReady(t, p)
		var chs []<-chan result
		for range 3 {
			chs = append(chs, checkOutAsync(context.Background(), p))
		}
		synctest.Wait()
		if n := p.Stats().Pending; n != 1 {
			t.Fatalf("%d pending under maxConnecting 1", n)
		}
		must(t, p.Reconfigure(pool.WithMaxConnecting(3)))
		synctest.Wait()
		if n := p.Stats().Pending; n != 3 {
			t.Errorf("%d pending after maxConnecting went to 3, want 3", n)
		}
		close(f.Block)
		for _, ch := range chs {
			r := <-ch
			must(t, r.err)
			mustCheckIn(t, p, r.c)
		}
	})
}

// A smaller maxPoolSize closes idle connections at once, the least recently
// used first, and the others as they come back, never one in use; a check-out
// waiting meanwhile gets a connection once the pool fits the limit.
func TestReconfigureSmallerMaxPoolSizeShrinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, log := newPool(t, f, pool.WithMaxPoolSize(4), pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		cs := make([]*pool.Conn, 4)
		for i := range cs {
			cs[i] = mustCheckOut(t, p)
		}
		mustCheckIn(t, p, cs[0]) // least recently used
		mustCheckIn(t, p, cs[1])
		must(t, p.Reconfigure(pool.WithMaxPoolSize(1)))
		s := p.Stats()
		if s.Total != 2 || s.InUse != 2 || s.ClosedShrunk != 2 {
			t.Fatalf("after shrinking to 1: %d connections, %d in use, %d closed as shrunk; want 2, 2, 2", s.Total, s.InUse, s.ClosedShrunk)
		}
		for _, l := range f.allLinks()[2:] {
			if l.closed.Load() {
				t.Fatalf("connection %d, in use, was closed", l.id)
			}
		}
		w := checkOutAsync(context.Background(), p)
		synctest.Wait()
		mustCheckIn(t, p, cs[2]) // above the limit: closed, the waiter waits on
		synctest.Wait()
		select {
		case r := <-w:
			t.Fatalf("a check-out was served above the limit: %v", r.err)
		default:
		}
		if s := p.Stats(); s.Total != 1 || s.ClosedShrunk != 3 {
			t.Fatalf("%d connections, %d closed as shrunk; want 1 and 3", s.Total, s.ClosedShrunk)
		}
		mustCheckIn(t, p, cs[3]) // the limit: goes to the waiter
		r := <-w
		must(t, r.err)
		if r.c != cs[3] {
			t.Errorf("the waiter got connection %d, want %d", r.c.ID(), cs[3].ID())
		}
		mustCheckIn(t, p, r.c)
		s = p.Stats()
		checkCounts(t, s)
		if s.Total != 1 || s.Available != 1 {
			t.Errorf("%d connections, %d available; want 1 and 1", s.Total, s.Available)
		}
		var reasons []string
		for _, e := range log.all() {
			if e.Type == pool.ConnectionClosed {
				reasons = append(reasons, e.Reason)
				if e.ConnectionID == cs[3].ID() {
					t.Errorf("connection %d closed, want it kept", e.ConnectionID)
				}
			}
		}
		if len(reasons) != 3 || reasons[0] != pool.ReasonShrunk || reasons[2] != pool.ReasonShrunk {
			t.Errorf("closed with reasons %v, want 3 times %q", reasons, pool.ReasonShrunk)
		}
		if e := log.all(); e[0].Type == pool.ConnectionClosed {
			t.Errorf("first event %v", e[0].Type)
		}
	})
}

// A larger minPoolSize has the maintenance establish the missing
// connections.
func TestReconfigureMinPoolSizePopulates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{})
		mustReady(t, p)
		must(t, p.Reconfigure(pool.WithMinPoolSize(3)))
		synctest.Wait()
		if s := p.Stats(); s.Available != 3 || s.MinPoolSize != 3 {
			t.Errorf("%d available with minPoolSize %d, want 3 and 3", s.Available, s.MinPoolSize)
		}
	})
}

// maxIdleTimeMS set on a running pool counts from the change for the
// connections that were idle with no limit.
func TestReconfigureMaxIdleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{}, pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		mustCheckIn(t, p, c)
		time.Sleep(time.Hour)
		must(t, p.Reconfigure(pool.WithMaxIdleTime(time.Minute)))
		c2 := mustCheckOut(t, p)
		if c2 != c {
			t.Fatalf("the idle connection was closed at once by a new maxIdleTimeMS")
		}
		mustCheckIn(t, p, c2)
		time.Sleep(time.Minute + time.Second)
		c3 := mustCheckOut(t, p)
		if c3 == c {
			t.Fatal("a connection idle longer than the new maxIdleTimeMS was checked out")
		}
		mustCheckIn(t, p, c3)
		if s := p.Stats(); s.ClosedIdle != 1 || s.MaxIdleTime != time.Minute {
			t.Errorf("%d closed as idle, maxIdleTime %v; want 1 and 1m", s.ClosedIdle, s.MaxIdleTime)
		}
	})
}

// waitQueueTimeoutMS set on a running pool limits the check-outs that start
// waiting after the change.
func TestReconfigureWaitQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
		mustReady(t, p)
		held := mustCheckOut(t, p)
		before := checkOutAsync(context.Background(), p)
		synctest.Wait()
		must(t, p.Reconfigure(pool.WithWaitQueueTimeout(time.Second)))
		start := time.Now()
		_, err := p.CheckOut(context.Background())
		var wqt *pool.WaitQueueTimeoutError
		if !errors.As(err, &wqt) || time.Since(start) != time.Second {
			t.Fatalf("check-out after the change: %v after %v, want a wait queue timeout after 1s", err, time.Since(start))
		}
		synctest.Wait()
		select {
		case r := <-before:
			t.Fatalf("the check-out queued before the change ended: %v", r.err)
		default:
		}
		mustCheckIn(t, p, held)
		r := <-before
		must(t, r.err)
		mustCheckIn(t, p, r.c)
	})
}

// Options Reconfigure cannot change, and limits New would refuse, are
// refused with an error naming them, and nothing changes.
func TestReconfigureRefuses(t *testing.T) {
	p, log := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(5))
	mustReady(t, p)
	for _, tc := range []struct {
		opts   []pool.Option
		option string
	}{
		{[]pool.Option{pool.WithMaxPoolSize(10), pool.WithTimeout(time.Second)}, "timeoutMS"},
		{[]pool.Option{pool.WithEventHandler(func(pool.Event) {})}, "eventHandler"},
		{[]pool.Option{pool.WithMaxLifetime(time.Hour, 0)}, "maxLifetime"},
		{[]pool.Option{pool.WithMinPoolSize(6)}, "minPoolSize"},
		{[]pool.Option{pool.WithMaxConnecting(0)}, "maxConnecting"},
	} {
		err := p.Reconfigure(tc.opts...)
		var oe *pool.OptionError
		if !errors.As(err, &oe) || oe.Option != tc.option {
			t.Errorf("Reconfigure: %v, want an *OptionError naming %s", err, tc.option)
		}
	}
	if s := p.Stats(); s.MaxPoolSize != 5 || s.MinPoolSize != 0 || s.MaxConnecting != 2 {
		t.Errorf("a refused Reconfigure changed the limits: %+v", s)
	}
	if n := len(reconfigured(log)); n != 0 {
		t.Errorf("%d PoolReconfigured events for refused changes", n)
	}
	closePool(t, p)
	if err := p.Reconfigure(pool.WithMaxPoolSize(1)); !errors.Is(err, pool.ErrPoolClosed) {
		t.Errorf("Reconfigure of a closed pool: %v, want ErrPoolClosed", err)
	}
}

// The log message reports every option as it is now.
func TestReconfigureLogMessage(t *testing.T) {
	h := newLogHandler(slog.LevelDebug)
	p, err := pool.New("127.0.0.1:27017", &fakeConnector{}, pool.WithLogger(slog.New(h)))
	must(t, err)
	h.watch(p)
	defer closePool(t, p)
	must(t, p.Reconfigure(pool.WithMaxPoolSize(7), pool.WithWaitQueueTimeout(1500*time.Microsecond)))
	var found bool
	for _, r := range h.records() {
		if r.Message != "Connection pool reconfigured" {
			continue
		}
		found = true
		want := map[string]int64{"maxPoolSize": 7, "minPoolSize": 0, "maxConnecting": 2, "maxIdleTimeMS": 0, "waitQueueTimeoutMS": 2}
		for k, v := range want {
			if got, ok := r.Attrs[k]; !ok || got.Int64() != v {
				t.Errorf("%s = %v, want %d (record %v)", k, got, v, r)
			}
		}
	}
	if !found {
		t.Errorf("no reconfigured message among %v", h.messages())
	}
}

// Reconfigure may be called while check-outs and check-ins run: the counts
// stay consistent and every connection in use stays open.
func TestReconfigureUnderLoad(t *testing.T) {
	f := &fakeConnector{}
	p, _ := newPool(t, f, pool.WithMaxPoolSize(8), pool.WithMaintenanceInterval(time.Millisecond))
	mustReady(t, p)
	done := make(chan struct{})
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				err := p.Do(context.Background(), func(c *pool.Conn) error {
					if c.Link().(*fakeLink).closed.Load() {
						return errors.New("checked out a closed connection")
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 200 {
		must(t, p.Reconfigure(pool.WithMaxPoolSize(1+i%8), pool.WithMinPoolSize(i%2), pool.WithMaxConnecting(1+i%3),
			pool.WithWaitQueueTimeout(time.Duration(i%2)*time.Hour), pool.WithMaxIdleTime(time.Duration(i%3)*time.Hour)))
	}
	close(done)
	for range 8 {
		must(t, recv(t, errs, "a worker's end"))
	}
	// The highest limits of the loop: establishments it started under a
	// higher maxConnecting than the last one may still be under way.
	must(t, p.Reconfigure(pool.WithMaxPoolSize(8), pool.WithMaxConnecting(3)))
	s := p.Stats()
	checkCounts(t, s)
}
