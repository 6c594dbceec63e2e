package pool_test

import (
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/mongopool/mongopool/pool"
)

// Clearing a pool that is paused already emits no PoolCleared event and
// writes no "Connection pool cleared" message: the specification says it
// MUST NOT, as the pool was cleared before and has made no connection since.
// The clear does the rest all the same: the generation moves on, so that
// errors of the generation before are known to be stale, and
// interruptInUseConnections interrupts the connections of that generation.
func TestClearPausedPoolEmitsNoEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLogHandler(slog.LevelDebug)
		p, log := newPool(t, &fakeConnector{}, pool.WithLogger(slog.New(h)))
		h.watch(p)
		want := func(events int, gen uint64, when string) {
			t.Helper()
			messages := 0
			for _, r := range h.records() {
				if r.Message == "Connection pool cleared" {
					messages++
				}
			}
			if n := log.count(pool.PoolCleared); n != events || messages != events {
				t.Fatalf("%s: %d PoolCleared events and %d cleared messages, want %d; events %v", when, n, messages, events, log.types())
			}
			if g := p.Generation(pool.ServiceID{}); g != gen {
				t.Fatalf("%s: generation %d, want %d", when, g, gen)
			}
		}

		must(t, p.Clear(pool.ClearOptions{}))
		want(0, 1, "cleared while paused since its creation")

		mustReady(t, p)
		c := mustCheckOut(t, p) // of generation 1
		must(t, p.Clear(pool.ClearOptions{Cause: errors.New("first error")}))
		want(1, 2, "cleared once ready")
		// A second error of the same generation, from a monitor that timed
		// out: the pool is paused, the clear is not announced, but the
		// connection in use is interrupted.
		must(t, p.Clear(pool.ClearOptions{Cause: errors.New("second error"), InterruptInUse: true}))
		want(1, 3, "cleared again while paused")
		if err := c.Err(); !errors.Is(err, pool.ErrPoolCleared) {
			t.Fatalf("the connection in use: Err() = %v, want it interrupted by the second clear", err)
		}
		mustCheckIn(t, p, c)

		mustReady(t, p)
		must(t, p.Clear(pool.ClearOptions{}))
		want(2, 4, "cleared once ready again")
	})
}

// A clear with KeepReady recycles the connections without pausing: a
// check-out goes on at once, with a new connection; the idle one of the
// generation before is closed, and the one in use when it is checked in.
func TestClearKeepReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, log := newPool(t, &fakeConnector{})
		mustReady(t, p)
		idle, inUse := mustCheckOut(t, p), mustCheckOut(t, p)
		mustCheckIn(t, p, idle)
		must(t, p.Clear(pool.ClearOptions{KeepReady: true}))
		c, err := p.CheckOut(t.Context())
		if err != nil {
			t.Fatalf("a check-out after a clear with KeepReady: %v, want a connection", err)
		}
		if c.Generation() != 1 {
			t.Fatalf("the connection after the clear: generation %d, want a new one, of generation 1", c.Generation())
		}
		mustCheckIn(t, p, c)
		mustCheckIn(t, p, inUse)
		synctest.Wait()
		if st := p.Stats(); st.Total != 1 {
			t.Fatalf("%d connections after the clear and the check-ins, want only the new one (events %v)", st.Total, log.types())
		}
		if n := log.count(pool.ConnectionClosed); n != 2 {
			t.Fatalf("%d ConnectionClosed events, want 2 (the stale idle one and the one in use)", n)
		}
	})
}
