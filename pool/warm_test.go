package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Warm establishes the connections at maxConnecting's pace, reports its
// progress, and returns once they are established.
func TestWarmEstablishesTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: 10 * time.Millisecond}
		p, _ := newPool(t, f, pool.WithMaxConnecting(2), pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		var steps []pool.WarmProgress
		start := time.Now()
		must(t, p.Warm(context.Background(), 5, func(w pool.WarmProgress) { steps = append(steps, w) }))
		if took := time.Since(start); took != 30*time.Millisecond {
			t.Errorf("5 establishments of 10ms, 2 at a time, took %v; want 30ms", took)
		}
		if s := p.Stats(); s.Available != 5 || s.Total != 5 {
			t.Errorf("%d available of %d, want 5 of 5", s.Available, s.Total)
		}
		if peak := f.peak.Load(); peak != 2 {
			t.Errorf("%d establishments at once, want maxConnecting's 2", peak)
		}
		last := steps[len(steps)-1]
		if last != (pool.WarmProgress{Target: 5, Established: 5}) || steps[0].Established != 0 || steps[0].Pending != 2 {
			t.Errorf("progress %+v", steps)
		}
		for i := 1; i < len(steps); i++ {
			if steps[i] == steps[i-1] {
				t.Errorf("progress reported twice unchanged: %+v", steps)
			}
		}
	})
}

// Without a target Warm establishes minPoolSize; it never goes past
// maxPoolSize, and counts the connections the pool has already.
func TestWarmTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPool(t, &fakeConnector{}, pool.WithMinPoolSize(3), pool.WithMaxPoolSize(4), pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		must(t, p.Warm(context.Background(), 0, nil))
		if s := p.Stats(); s.Total != 3 || s.InUse != 1 {
			t.Errorf("after Warm to minPoolSize: %d connections, %d in use; want 3 and 1", s.Total, s.InUse)
		}
		must(t, p.Warm(context.Background(), 100, nil))
		if s := p.Stats(); s.Total != 4 {
			t.Errorf("after Warm to 100: %d connections, want maxPoolSize's 4", s.Total)
		}
		mustCheckIn(t, p, c)
	})
}

// Warm stops at the first failed establishment with its error, and fails
// at once on a paused or closed pool.
func TestWarmFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection refused")
		f := &fakeConnector{FailBeforeHello: boom}
		p, _ := newPool(t, f, pool.WithMaintenanceInterval(-1))
		if err := p.Warm(context.Background(), 3, nil); !errors.As(err, new(*pool.PoolClearedError)) {
			t.Errorf("Warm of a paused pool: %v, want a *PoolClearedError", err)
		}
		mustReady(t, p)
		err := p.Warm(context.Background(), 3, nil)
		var ce *pool.ConnectionError
		if !errors.As(err, &ce) || !errors.Is(err, boom) {
			t.Fatalf("Warm against a refusing server: %v, want its *ConnectionError", err)
		}
		// Backing off now, with nothing under way: Warm says why at once.
		synctest.Wait() // the other establishment Warm started ends too
		started := f.started.Load()
		if err := p.Warm(context.Background(), 3, nil); !errors.Is(err, boom) || f.started.Load() != started {
			t.Errorf("Warm while backing off: %v after %d establishments, want the last error and none", err, f.started.Load()-started)
		}
		closePool(t, p)
		if err := p.Warm(context.Background(), 3, nil); !errors.Is(err, pool.ErrPoolClosed) {
			t.Errorf("Warm of a closed pool: %v, want ErrPoolClosed", err)
		}
	})
}

// Warm returns when its context ends; the establishments go on.
func TestWarmContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Block: make(chan struct{})}
		p, _ := newPool(t, f, pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := p.Warm(ctx, 2, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Warm: %v, want the context's deadline", err)
		}
		close(f.Block)
		synctest.Wait()
		if s := p.Stats(); s.Available != 2 {
			t.Errorf("%d available after the establishments ended, want 2", s.Available)
		}
	})
}

// A clear during Warm ends it with the pool's error.
func TestWarmCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Block: make(chan struct{})}
		p, _ := newPool(t, f, pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		errc := make(chan error, 1)
		go func() { errc <- p.Warm(context.Background(), 2, nil) }()
		synctest.Wait()
		must(t, p.Clear(pool.ClearOptions{Cause: errors.New("server down")}))
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.As(err, new(*pool.PoolClearedError)) {
				t.Errorf("Warm across a clear: %v, want a *PoolClearedError", err)
			}
		default:
			t.Fatal("Warm went on waiting after a clear")
		}
		close(f.Block)
	})
}
