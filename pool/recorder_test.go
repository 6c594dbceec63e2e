package pool_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

func recordedTypes(rs []pool.RecordedEvent) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Type.String())
	}
	return out
}

// The flight recorder keeps the last k events, oldest first, as the event
// handlers saw them; without it there is nothing to read.
func TestFlightRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := readyPool(t)
		mustCheckIn(t, off, mustCheckOut(t, off))
		if rs := off.RecentEvents(); rs != nil {
			t.Errorf("RecentEvents without a recorder: %v", rs)
		}

		f := &fakeConnector{Delay: 3 * time.Millisecond}
		p, err := pool.New("127.0.0.1:27017", f, pool.WithFlightRecorder(4), pool.WithMaintenanceInterval(-1))
		must(t, err)
		t.Cleanup(func() { closePool(t, p) })
		if got := recordedTypes(p.RecentEvents()); !slices.Equal(got, []string{"ConnectionPoolCreated"}) {
			t.Errorf("after New: %v", got)
		}
		created := time.Now()
		mustReady(t, p)
		time.Sleep(time.Second)
		c := mustCheckOut(t, p)
		mustCheckIn(t, p, c)
		rs := p.RecentEvents()
		want := []string{"ConnectionCreated", "ConnectionReady", "ConnectionCheckedOut", "ConnectionCheckedIn"}
		if got := recordedTypes(rs); !slices.Equal(got, want) {
			t.Fatalf("recorded %v, want the last 4: %v", got, want)
		}
		for _, r := range rs {
			if r.ConnectionID != c.ID() {
				t.Errorf("%v of connection %d, want %d", r.Type, r.ConnectionID, c.ID())
			}
			want := time.Second + 3*time.Millisecond // once established
			if r.Type == pool.ConnectionCreated {
				want = time.Second
			}
			if at := r.Time.Sub(created); at != want {
				t.Errorf("%v recorded %v after the pool's creation, want %v", r.Type, at, want)
			}
		}
		if rs[1].Duration != 3*time.Millisecond || rs[2].Duration != 3*time.Millisecond || rs[0].Duration != 0 {
			t.Errorf("durations %v, %v, %v; want 0, 3ms, 3ms", rs[0].Duration, rs[1].Duration, rs[2].Duration)
		}
		// What RecentEvents returns is the caller's: later events and calls
		// leave it alone.
		kept := slices.Clone(rs)
		mustCheckIn(t, p, mustCheckOut(t, p))
		p.RecentEvents()
		if !slices.Equal(rs, kept) {
			t.Errorf("events returned before changed to %v", rs)
		}

		// A clear's event keeps its flag; a closed connection its reason.
		must(t, p.Clear(pool.ClearOptions{InterruptInUse: true}))
		closePool(t, p)
		rs = p.RecentEvents()
		want = []string{"ConnectionCheckedIn", "ConnectionPoolCleared", "ConnectionClosed", "ConnectionPoolClosed"}
		if got := recordedTypes(rs); !slices.Equal(got, want) {
			t.Fatalf("recorded %v, want %v", got, want)
		}
		if !rs[1].Interrupt || rs[2].Reason != pool.ReasonPoolClosed || rs[2].ConnectionID != c.ID() {
			t.Errorf("cleared %+v, closed %+v: want the interrupt flag, and connection %d closed with the pool", rs[1], rs[2], c.ID())
		}
	})
}

// A check-out that gives up carries the events that came before, and a
// recorder larger than the story holds all of it.
func TestFlightRecorderOnTimeoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := readyPool(t, pool.WithFlightRecorder(100), pool.WithMaxPoolSize(1))
		c := mustCheckOut(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := checkOut(t, ctx, p)
		var e *pool.WaitQueueTimeoutError
		if !errors.As(err, &e) {
			t.Fatalf("check-out: %v, want a WaitQueueTimeoutError", err)
		}
		want := []string{"ConnectionPoolCreated", "ConnectionPoolReady",
			"ConnectionCheckOutStarted", "ConnectionCreated", "ConnectionReady", "ConnectionCheckedOut",
			"ConnectionCheckOutStarted"}
		if got := recordedTypes(e.RecentEvents); !slices.Equal(got, want) {
			t.Errorf("error's events %v, want %v", got, want)
		}
		// The pool's record goes on with the failure itself.
		if got := recordedTypes(p.RecentEvents()); !slices.Equal(got, append(want, "ConnectionCheckOutFailed")) {
			t.Errorf("pool's events %v", got)
		}
		if rs := p.RecentEvents(); rs[len(rs)-1].Reason != pool.ReasonTimeout || rs[len(rs)-1].Duration != 10*time.Millisecond {
			t.Errorf("failure recorded as %+v", rs[len(rs)-1])
		}
		mustCheckIn(t, p, c)
	})
}

// Recording allocates nothing once the ring is full.
func TestFlightRecorderAllocatesNothing(t *testing.T) {
	p := readyPool(t, pool.WithFlightRecorder(8))
	if allocs := idleRoundTripAllocs(t, p); allocs != 0 {
		t.Fatalf("check-out + check-in with the flight recorder: %v allocations, want 0", allocs)
	}
	if n := len(p.RecentEvents()); n != 8 {
		t.Fatalf("%d events recorded, want 8", n)
	}
}

// Many goroutines record and read at once (run with -race).
func TestFlightRecorderConcurrent(t *testing.T) {
	p := readyPool(t, pool.WithFlightRecorder(16), pool.WithMaxPoolSize(4))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				c, err := p.CheckOut(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				p.RecentEvents()
				p.CheckIn(c)
			}
		}()
	}
	within(t, hangLimit, wg.Wait)
	rs := p.RecentEvents()
	if len(rs) != 16 {
		t.Fatalf("%d events, want 16", len(rs))
	}
	for i, r := range rs {
		if r.Type < pool.PoolCreated || r.Type > pool.ConnectionCheckedIn {
			t.Errorf("record %d has type %v", i, r.Type)
		}
		if i > 0 && r.Time.Before(rs[i-1].Time) {
			t.Errorf("record %d at %v, before the one before it", i, r.Time)
		}
	}
}
