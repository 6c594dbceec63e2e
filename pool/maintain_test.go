package pool_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The maintenance establishes minPoolSize only once the pool is ready, and
// chains the establishments: warm-up takes minPoolSize / maxConnecting
// establishment times, not maintenance intervals.
func TestWarmUpToMinPoolSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: 5 * time.Millisecond}
		p, log := newPool(t, f, pool.WithMinPoolSize(100), pool.WithMaxConnecting(2), pool.WithMaintenanceInterval(10*time.Second))
		time.Sleep(time.Second)
		if f.started.Load() != 0 {
			t.Fatal("a paused pool established connections")
		}
		start := time.Now()
		mustReady(t, p)
		log.waitFor(t, pool.ConnectionReady, 100)
		synctest.Wait()
		took := time.Since(start)
		s := p.Stats()
		if s.Available != 100 || f.peak.Load() != 2 {
			t.Fatalf("stats %+v, peak %d", s, f.peak.Load())
		}
		// 100 establishments of 5ms, 2 at a time.
		if took != 250*time.Millisecond {
			t.Fatalf("warm-up took %v of the fake clock, want 250ms", took)
		}
		// PoolReady comes before any background establishment.
		for _, typ := range log.types(pool.PoolCreated) {
			if typ == "ConnectionPoolReady" {
				break
			}
			t.Fatalf("%s before ConnectionPoolReady", typ)
		}
	})
}

// Idle connections past maxIdleTimeMS and stale ones are closed by the
// maintenance, without a check-out meeting them.
func TestMaintenanceClosesIdleAndStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, log := newPool(t, &fakeConnector{}, pool.WithMaxIdleTime(time.Second), pool.WithMaintenanceInterval(100*time.Millisecond))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		mustCheckIn(t, p, c)
		time.Sleep(1150 * time.Millisecond) // runs every 100ms; idle for more than 1s at the run at 1.1s
		synctest.Wait()
		if s := p.Stats(); s.ClosedIdle != 1 || s.Total != 0 {
			t.Fatalf("stats %+v, want the idle connection closed", s)
		}

		c = mustCheckOut(t, p)
		mustCheckIn(t, p, c)
		p.Clear(pool.ClearOptions{}) // a run starts at once
		synctest.Wait()
		if s := p.Stats(); s.ClosedStale != 1 || s.Total != 0 {
			t.Fatalf("stats %+v, want the stale connection closed right after the clear", s)
		}
		for _, e := range log.all() {
			if e.Type == pool.ConnectionClosed && e.ConnectionID == 1 && e.Reason != pool.ReasonIdle {
				t.Fatalf("connection 1 closed with reason %q", e.Reason)
			}
		}
	})
}

// A negative interval means no maintenance at all: nothing establishes for
// minPoolSize, neither Ready nor the end of a check-out's establishment.
func TestNegativeIntervalDisablesMaintenance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, _ := newPool(t, f, pool.WithMinPoolSize(2), pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		time.Sleep(time.Minute)
		if f.started.Load() != 0 {
			t.Fatal("maintenance ran with a negative interval")
		}
		mustCheckIn(t, p, mustCheckOut(t, p))
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := f.started.Load(); n != 1 {
			t.Fatalf("%d establishments after one check-out, want 1: minPoolSize was populated with the maintenance disabled", n)
		}
	})
}

// A clear pauses the population until Ready.
func TestClearHaltsPopulation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, _ := newPool(t, f, pool.WithMinPoolSize(3), pool.WithMaintenanceInterval(10*time.Millisecond))
		mustReady(t, p)
		synctest.Wait()
		p.Clear(pool.ClearOptions{})
		time.Sleep(time.Second)
		if s := p.Stats(); s.Total != 0 || s.Created != 3 {
			t.Fatalf("stats while paused %+v, want the stale connections closed and none created", s)
		}
		mustReady(t, p)
		synctest.Wait()
		if s := p.Stats(); s.Available != 3 || s.Created != 6 {
			t.Fatalf("stats after ready %+v", s)
		}
	})
}

// A connection's idle time counts from its last check-in. One that is
// checked in, checked out again, used for a while and checked in a second
// time is not closed as idle until maxIdleTimeMS after that second
// check-in, however long ago it was established, first checked in or last
// checked out; and then it is. Both the maintenance and a check-out are
// checked: the second case runs without maintenance.
func TestIdleTimeCountsFromLastCheckIn(t *testing.T) {
	const (
		maxIdle  = time.Second
		interval = 100 * time.Millisecond
		step     = 600 * time.Millisecond // less than maxIdle; two of them more
	)
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{
		{"maintenance", interval},
		{"check-out", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, log := newPool(t, &fakeConnector{}, pool.WithMaxIdleTime(maxIdle), pool.WithMaintenanceInterval(tc.interval))
				mustReady(t, p)
				start := time.Now()
				var lastIn time.Time
				checkIn := func(c *pool.Conn) {
					t.Helper()
					mustCheckIn(t, p, c)
					lastIn = time.Now()
				}
				wantIdle := func(c *pool.Conn) {
					t.Helper()
					synctest.Wait()
					if s := p.Stats(); s.ClosedIdle != 0 || s.Available != 1 {
						t.Fatalf("at %v, %v after connection %d's last check-in (maxIdleTimeMS %v): stats %+v, want it idle; events %v",
							time.Since(start), time.Since(lastIn), c.ID(), maxIdle, s, log.types())
					}
					if got := mustCheckOut(t, p); got != c {
						t.Fatalf("at %v, %v after connection %d's last check-in (maxIdleTimeMS %v): checked out connection %d; events %v",
							time.Since(start), time.Since(lastIn), c.ID(), maxIdle, got.ID(), log.types())
					}
				}

				c := mustCheckOut(t, p) // established and checked out at 0
				checkIn(c)
				time.Sleep(step)
				wantIdle(c)
				time.Sleep(step) // in use
				checkIn(c)
				time.Sleep(step) // 1.8s after its establishment and first check-in, 1.2s after its check-out
				wantIdle(c)
				checkIn(c)
				time.Sleep(maxIdle - interval)
				wantIdle(c)
				checkIn(c)

				// Past maxIdleTimeMS, the first maintenance run or the next
				// check-out closes it.
				time.Sleep(maxIdle + interval)
				synctest.Wait()
				wantCreated := int64(1)
				if tc.interval < 0 {
					got := mustCheckOut(t, p)
					defer mustCheckIn(t, p, got)
					wantCreated++ // for that check-out
				}
				if s := p.Stats(); s.ClosedIdle != 1 || s.Created != wantCreated {
					t.Fatalf("%v after connection %d's last check-in: stats %+v, want it closed as idle (maxIdleTimeMS %v)",
						time.Since(lastIn), c.ID(), s, maxIdle)
				}
			})
		})
	}
}
