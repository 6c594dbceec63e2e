package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/mongopool/mongopool/pool"
)

// A clear with interruptInUseConnections closes the links of the checked-out
// connections of the cleared generation under their users, whose operations
// fail with the specification's retryable error.
func TestInterruptInUseConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, log := newPool(t, f)
		mustReady(t, p)
		cause := fmt.Errorf("heartbeat: %w", os.ErrDeadlineExceeded)

		opErr := make(chan error, 1)
		go func() {
			opErr <- p.Do(context.Background(), func(c *pool.Conn) error {
				return c.Link().(*fakeLink).Use(context.Background())
			})
		}()
		idle := mustCheckOut(t, p)
		synctest.Wait()
		if err := p.Clear(pool.ClearOptions{Cause: cause, InterruptInUse: true}); err != nil {
			t.Fatal(err)
		}
		err := recv(t, opErr, "the interrupted operation")
		var pce *pool.PoolClearedError
		if !errors.As(err, &pce) || !pce.Interrupted || !errors.Is(err, cause) || !pool.HasErrorLabel(err, pool.LabelRetryable) {
			t.Fatalf("interrupted operation returned %v", err)
		}
		if want := "Connection to 127.0.0.1:27017 interrupted due to server monitor timeout: heartbeat: i/o timeout"; err.Error() != want {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
		if idle.Err() == nil {
			t.Fatal("the other checked-out connection was not interrupted")
		}
		mustCheckIn(t, p, idle)
		synctest.Wait()
		for _, l := range f.allLinks() {
			if l.closes.Load() != 1 {
				t.Fatalf("link %d closed %d times, want once", l.id, l.closes.Load())
			}
		}
		if s := p.Stats(); s.Total != 0 || s.ClosedStale != 2 {
			t.Fatalf("stats %+v, want both connections closed as stale", s)
		}
		ev := log.all()
		for _, e := range ev {
			if e.Type == pool.PoolCleared && !e.Interrupt {
				t.Fatalf("PoolCleared event without the interrupt flag: %+v", e)
			}
		}
	})
}

// A clear without the flag leaves checked-out connections alone until they
// come back.
func TestClearWithoutInterruptLeavesInUseConnections(t *testing.T) {
	p, _ := newPool(t, &fakeConnector{})
	mustReady(t, p)
	c := mustCheckOut(t, p)
	p.Clear(pool.ClearOptions{})
	if c.Err() != nil || c.Link().(*fakeLink).closed.Load() {
		t.Fatal("a clear without interrupt touched a checked-out connection")
	}
	mustCheckIn(t, p, c)
	if s := p.Stats(); s.ClosedStale != 1 {
		t.Fatalf("stats %+v, want the stale connection closed at check-in", s)
	}
}

// Interrupting also cancels establishments: the check-out waiting on one fails
// after the pool announced the clear and the connection closed.
func TestInterruptPendingConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Block: make(chan struct{})}
		p, log := newPool(t, f)
		mustReady(t, p)
		res := checkOutAsync(context.Background(), p)
		synctest.Wait()
		p.Clear(pool.ClearOptions{InterruptInUse: true})
		r := recv(t, res, "the check-out waiting on the interrupted establishment")
		var pce *pool.PoolClearedError
		if !errors.As(r.err, &pce) {
			t.Fatalf("check-out: %v, want a PoolClearedError", r.err)
		}
		synctest.Wait()
		got := log.types(pool.PoolCreated, pool.PoolReady)
		want := []string{"ConnectionCheckOutStarted", "ConnectionCreated", "ConnectionPoolCleared", "ConnectionClosed", "ConnectionCheckOutFailed"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if f.inFlight.Load() != 0 {
			t.Fatal("the establishment was not canceled")
		}
	})
}

// In load-balanced mode the interrupt reaches only the cleared service.
func TestInterruptOneService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{ServiceID: oddEven}, pool.WithLoadBalanced(true))
		mustReady(t, p)
		a, b := mustCheckOut(t, p), mustCheckOut(t, p)
		p.Clear(pool.ClearOptions{ServiceID: svcA, InterruptInUse: true})
		synctest.Wait()
		if a.Err() == nil || !a.Link().(*fakeLink).closed.Load() {
			t.Fatal("service A's connection was not interrupted")
		}
		if b.Err() != nil || b.Link().(*fakeLink).closed.Load() {
			t.Fatal("service B's connection was interrupted")
		}
		mustCheckIn(t, p, a)
		mustCheckIn(t, p, b)
	})
}
