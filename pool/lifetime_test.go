package pool_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// A connection past its lifetime is closed when it is checked in, never
// while it is in use.
func TestMaxLifetimeClosesOnCheckIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, log := newPool(t, f, pool.WithMaxLifetime(time.Minute, 0), pool.WithMaintenanceInterval(time.Second))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if f.allLinks()[0].closed.Load() {
			t.Fatal("a connection in use was closed for its lifetime")
		}
		mustCheckIn(t, p, c)
		s := p.Stats()
		if s.ClosedLifetime != 1 || s.Total != 0 {
			t.Fatalf("%d closed for their lifetime, %d left; want 1 and 0", s.ClosedLifetime, s.Total)
		}
		checkCounts(t, s)
		if e := log.all(); e[len(e)-1].Type != pool.ConnectionClosed || e[len(e)-1].Reason != pool.ReasonLifetime {
			t.Errorf("last event %v %q, want ConnectionClosed %q", e[len(e)-1].Type, e[len(e)-1].Reason, pool.ReasonLifetime)
		}
	})
}

// An idle connection past its lifetime is closed by the maintenance, or
// passed over by a check-out.
func TestMaxLifetimeIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{}, pool.WithMaxLifetime(time.Minute, 0), pool.WithMaintenanceInterval(time.Second))
		mustReady(t, p)
		mustCheckIn(t, p, mustCheckOut(t, p))
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		if n := p.Stats().Available; n != 1 {
			t.Fatalf("%d available before the lifetime, want 1", n)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Available != 0 || s.ClosedLifetime != 1 {
			t.Errorf("%d available, %d closed for their lifetime after it; want 0 and 1", s.Available, s.ClosedLifetime)
		}

		c := mustCheckOut(t, p) // a new one
		mustCheckIn(t, p, c)
		q, _ := newPool(t, &fakeConnector{}, pool.WithMaxLifetime(time.Minute, 0), pool.WithMaintenanceInterval(-1))
		mustReady(t, q)
		old := mustCheckOut(t, q)
		mustCheckIn(t, q, old)
		time.Sleep(time.Minute)
		if c := mustCheckOut(t, q); c == old {
			t.Error("a check-out got a connection past its lifetime")
		}
	})
}

// The jitter spreads the ends of connections made together over
// [lifetime-jitter, lifetime].
func TestMaxLifetimeJitterSpreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		p, log := newPool(t, &fakeConnector{}, pool.WithMaxLifetime(100*time.Second, 50*time.Second),
			pool.WithMaxPoolSize(n), pool.WithMaxConnecting(n), pool.WithMaintenanceInterval(time.Second))
		mustReady(t, p)
		cs := make([]*pool.Conn, n)
		for i := range cs {
			cs[i] = mustCheckOut(t, p)
		}
		for _, c := range cs {
			mustCheckIn(t, p, c)
		}
		start := time.Now()
		closedAt := map[time.Duration]int{}
		for s := 0; s <= 101; s++ {
			before := log.count(pool.ConnectionClosed)
			time.Sleep(time.Second)
			synctest.Wait()
			if k := log.count(pool.ConnectionClosed) - before; k > 0 {
				closedAt[time.Since(start).Round(time.Second)] += k
			}
		}
		total := 0
		for at, k := range closedAt {
			total += k
			if at < 50*time.Second || at > 101*time.Second {
				t.Errorf("%d connections closed at %v, outside [50s, 101s]", k, at)
			}
		}
		if total != n {
			t.Errorf("%d connections closed, want %d", total, n)
		}
		// With 20 draws over 50 s, all in one second has a chance of 50^-19.
		if len(closedAt) < 2 {
			t.Errorf("every connection expired in the same second: %v", closedAt)
		}
	})
}

func TestMaxLifetimeOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		life, jitter time.Duration
		option       string
	}{
		{-time.Second, 0, "maxLifetime"},
		{time.Second, 2 * time.Second, "lifetimeJitter"},
		{time.Second, -1, "lifetimeJitter"},
	} {
		_, err := pool.New("127.0.0.1:27017", &fakeConnector{}, pool.WithMaxLifetime(tc.life, tc.jitter))
		var oe *pool.OptionError
		if !errors.As(err, &oe) || oe.Option != tc.option {
			t.Errorf("WithMaxLifetime(%v, %v): %v, want an *OptionError naming %s", tc.life, tc.jitter, err, tc.option)
		}
	}
}
