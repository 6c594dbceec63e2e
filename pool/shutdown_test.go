package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Shutdown closes the pool at once for new check-outs and returns once the
// connections checked out come back.
func TestShutdownWaitsForCheckIns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, log := newPool(t, f)
		mustReady(t, p)
		a, b := mustCheckOut(t, p), mustCheckOut(t, p)
		mustCheckIn(t, p, b) // idle: closed at once
		done := make(chan error, 1)
		go func() { done <- p.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned with a connection checked out: %v", err)
		default:
		}
		if _, err := p.CheckOut(context.Background()); !errors.Is(err, pool.ErrPoolClosed) {
			t.Errorf("check-out during Shutdown: %v, want ErrPoolClosed", err)
		}
		if log.count(pool.PoolClosed) != 1 || f.openLinks() != 1 {
			t.Errorf("%d PoolClosed events, %d open links; want 1 and 1 (the one in use)", log.count(pool.PoolClosed), f.openLinks())
		}
		mustCheckIn(t, p, a)
		synctest.Wait()
		select {
		case err := <-done:
			must(t, err)
		default:
			t.Fatal("Shutdown still waiting after the last check-in")
		}
		if a.Err() != nil || f.openLinks() != 0 {
			t.Errorf("connection error %v, %d open links; want nil and 0", a.Err(), f.openLinks())
		}
	})
}

// When its context ends, Shutdown closes the connections still checked out
// under their users, who learn why.
func TestShutdownInterruptsAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{}
		p, _ := newPool(t, f)
		mustReady(t, p)
		opErr := make(chan error, 1)
		go func() {
			opErr <- p.Do(context.Background(), func(c *pool.Conn) error {
				return c.Link().(*fakeLink).Use(context.Background()) // until interrupted
			})
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := p.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("Shutdown: %v after %v, want the deadline after 5s", err, time.Since(start))
		}
		err = <-opErr
		var pc *pool.PoolClosedError
		if !errors.As(err, &pc) || !pc.Interrupted {
			t.Errorf("the interrupted operation: %v, want an interrupted *PoolClosedError", err)
		}
		if n := f.openLinks(); n != 0 {
			t.Errorf("%d open links after Shutdown", n)
		}
		if s := p.Stats(); s.Total != 0 || s.ClosedPoolClosed != 1 {
			t.Errorf("%d connections, %d closed by the pool's close; want 0 and 1", s.Total, s.ClosedPoolClosed)
		}
	})
}

// With nothing checked out, Shutdown is Close.
func TestShutdownIdle(t *testing.T) {
	f := &fakeConnector{}
	p, _ := newPool(t, f, pool.WithMinPoolSize(2))
	mustReady(t, p)
	must(t, p.Warm(context.Background(), 0, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // even a done context: nothing to wait for
	must(t, p.Shutdown(ctx))
	if n := f.openLinks(); n != 0 {
		t.Errorf("%d open links after Shutdown", n)
	}
}
