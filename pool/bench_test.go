package pool_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The idle fast path allocates nothing when nobody listens.
func TestIdleCheckOutCheckInAllocatesNothing(t *testing.T) {
	p := readyPool(t)
	if allocs := idleRoundTripAllocs(t, p); allocs != 0 {
		t.Fatalf("check-out + check-in of an idle connection: %v allocations, want 0", allocs)
	}
}

// doneCounter is a context that counts the calls of its Done, which a
// context may make its channel (and its timer) at.
type doneCounter struct {
	context.Context
	dones int
}

func (c *doneCounter) Done() <-chan struct{} {
	c.dones++
	return c.Context.Done()
}

// A check-out that finds an idle connection asks its context for Err, not
// Done: a context that makes its deadline's timer only when something
// waits (the proxy's) then costs nothing. One that waits does ask, and is
// cut short by the context's end.
func TestIdleCheckOutDoesNotWaitOnContext(t *testing.T) {
	p := readyPool(t, pool.WithMaxPoolSize(1))
	mustCheckIn(t, p, mustCheckOut(t, p))
	ctx := &doneCounter{Context: context.Background()}
	c, err := p.CheckOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.dones != 0 {
		t.Errorf("an idle check-out called its context's Done %d times, want none", ctx.dones)
	}
	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	ctx = &doneCounter{Context: short}
	if _, err := p.CheckOut(ctx); err == nil {
		t.Fatal("a check-out of a full pool succeeded")
	}
	if ctx.dones == 0 {
		t.Error("a check-out that waited never asked its context for Done")
	}
	mustCheckIn(t, p, c)
}

// warm establishes n connections and leaves them idle.
func warm(b testing.TB, p *pool.Pool, n int) {
	conns := make([]*pool.Conn, n)
	for i := range conns {
		conns[i] = mustCheckOut(b, p)
	}
	for _, c := range conns {
		mustCheckIn(b, p, c)
	}
}

func BenchmarkCheckOutCheckIn(b *testing.B) {
	run := func(b *testing.B, p *pool.Pool) {
		warm(b, p, 1)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			c, err := p.CheckOut(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.CheckIn(c)
		}
	}
	b.Run("serial", func(b *testing.B) { run(b, readyPool(b)) })
	b.Run("serial/events", func(b *testing.B) {
		run(b, readyPool(b, pool.WithEventHandler(func(pool.Event) {})))
	})
	b.Run("serial/logger-at-info", func(b *testing.B) {
		run(b, readyPool(b, pool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	})
	b.Run("serial/debug-log", func(b *testing.B) {
		h := slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})
		run(b, readyPool(b, pool.WithLogger(slog.New(h))))
	})
	// The costs of the observability options, each on its own: timing
	// every use, the leak detector without and with call sites, the
	// flight recorder.
	b.Run("serial/use-every", func(b *testing.B) { run(b, readyPool(b, pool.WithUseSampling(1))) })
	b.Run("serial/leak-detector", func(b *testing.B) { run(b, readyPool(b, pool.WithLeakDetector(time.Hour, 0))) })
	b.Run("serial/leak-detector-8-frames", func(b *testing.B) { run(b, readyPool(b, pool.WithLeakDetector(time.Hour, 8))) })
	b.Run("serial/flight-recorder", func(b *testing.B) { run(b, readyPool(b, pool.WithFlightRecorder(256))) })
}

func BenchmarkParallel(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(map[int]string{1: "gomaxprocs", 32: "x32"}[par], func(b *testing.B) {
			p := readyPool(b, pool.WithMaxPoolSize(0))
			ctx := context.Background()
			b.SetParallelism(par)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := p.CheckOut(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					p.CheckIn(c)
				}
			})
		})
	}
}

// Contended: 64 goroutines share 4 connections.
func BenchmarkContended(b *testing.B) {
	run := func(b *testing.B, opts ...pool.Option) {
		p := readyPool(b, append([]pool.Option{pool.WithMaxPoolSize(4)}, opts...)...)
		warm(b, p, 4)
		ctx := context.Background()
		const workers = 64
		var wg sync.WaitGroup
		ops := make(chan struct{}, workers)
		b.ReportAllocs()
		b.ResetTimer()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ops {
					c, err := p.CheckOut(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					p.CheckIn(c)
				}
			}()
		}
		for range b.N {
			ops <- struct{}{}
		}
		close(ops)
		wg.Wait()
	}
	b.Run("plain", func(b *testing.B) { run(b) })
	b.Run("events", func(b *testing.B) { run(b, pool.WithEventHandler(func(pool.Event) {})) })
}
