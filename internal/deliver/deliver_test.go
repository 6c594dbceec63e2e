package deliver

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// owner is what a queue's owner looks like: a mutex it holds when it pushes.
type owner struct {
	mu sync.Mutex
	q  Queue[int]
}

func newOwner(limit int, handler func(int), onDrop func(uint64)) *owner {
	o := &owner{}
	o.q.Init(limit, handler, onDrop)
	return o
}

func (o *owner) push(v int) {
	o.mu.Lock()
	wake := o.q.Push(v)
	o.mu.Unlock()
	if wake {
		o.q.Wake()
	}
}

func (o *owner) close() {
	o.mu.Lock()
	wake := o.q.Close()
	o.mu.Unlock()
	if wake {
		o.q.Wake()
	}
}

func TestDeliversInOrderFromManyGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []int
		o := newOwner(0, func(v int) { got = append(got, v) }, nil)
		// Each goroutine pushes its own increasing sequence; under the
		// owner's lock the pushes interleave, but each sequence must come
		// out in its own order, and nothing may be lost.
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 1000 {
					o.push(g*10000 + i)
				}
			})
		}
		wg.Wait()
		if err := o.q.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		o.close()
		if len(got) != 4000 {
			t.Fatalf("delivered %d values, want 4000", len(got))
		}
		last := map[int]int{0: -1, 1: -1, 2: -1, 3: -1}
		for _, v := range got {
			g, i := v/10000, v%10000
			if i <= last[g] {
				t.Fatalf("value %d of goroutine %d delivered after %d", i, g, last[g])
			}
			last[g] = i
		}
	})
}

func TestSlowHandlerNeverBlocksThePusher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var got []int
		var drops []uint64
		o := newOwner(10, func(v int) {
			if v == 0 {
				<-release // the handler is stuck on the first value
			}
			got = append(got, v)
		}, func(n uint64) { drops = append(drops, n) })
		defer o.close()
		o.push(0)
		synctest.Wait() // the handler has 0, and is stuck
		start := time.Now()
		for i := 1; i < 25; i++ {
			o.push(i)
		}
		if time.Since(start) != 0 {
			t.Fatalf("pushing behind a stuck handler took %v of the fake clock", time.Since(start))
		}
		dropped, pending := o.q.Dropped(), o.q.Pending()
		// The handler holds 0; 1 to 10 fill the queue; 11 to 24 are dropped.
		if dropped != 14 || pending != 11 {
			close(release)
			t.Fatalf("dropped %d, pending %d; want 14 and 11", dropped, pending)
		}
		close(release)
		if err := o.q.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		o.push(99) // the next batch tells of the drops
		o.close()
		synctest.Wait()
		if len(got) != 12 || got[10] != 10 || got[11] != 99 {
			t.Fatalf("delivered %v", got)
		}
		if len(drops) != 1 || drops[0] != 14 {
			t.Fatalf("onDrop heard %v, want [14]", drops)
		}
	})
}

func TestHandlerMayCallTheOwnerBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o *owner
		var got []int
		o = newOwner(0, func(v int) {
			got = append(got, v)
			if v < 5 {
				o.push(v + 1) // re-entrant: queued behind, delivered next
			}
			if v == 5 {
				o.close() // closing from the handler does not wait for itself
			}
		}, nil)
		o.push(0)
		synctest.Wait()
		if len(got) != 6 {
			t.Fatalf("delivered %v, want 0 to 5", got)
		}
	})
}

func TestWaitHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		o := newOwner(0, func(int) { <-release }, nil)
		o.push(1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := o.q.Wait(ctx); err != context.DeadlineExceeded {
			t.Fatalf("Wait behind a stuck handler: %v, want the context's deadline", err)
		}
		close(release)
		o.close()
	})
}

func TestCloseEndsTheGoroutineAfterTheLastValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []int
		o := newOwner(0, func(v int) { got = append(got, v) }, nil)
		running := func() bool {
			o.q.mu.Lock()
			defer o.q.mu.Unlock()
			return o.q.running
		}
		o.push(1)
		o.push(2)
		o.close()
		synctest.Wait()
		if running() || len(got) != 2 {
			t.Fatalf("after close: running %v, delivered %v", running(), got)
		}
		// What the owner reports after its close is delivered too, by a
		// goroutine that ends likewise.
		o.push(3)
		synctest.Wait()
		if running() || len(got) != 3 || got[2] != 3 {
			t.Fatalf("a push after close: running %v, delivered %v", running(), got)
		}
		// The bubble ending checks that no goroutine is left.
	})
}

func TestNoGoroutineWithoutPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOwner(0, func(int) { t.Error("nothing was pushed") }, nil)
		if err := o.q.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		o.close()
	})
}

func BenchmarkPush(b *testing.B) {
	o := newOwner(0, func(int) {}, nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o.push(i)
	}
	o.close()
}

// A producer that keeps the only processor busy still has its values
// delivered, not dropped: a push that finds the queue crowded makes Wake
// yield, and the delivery goroutine runs then rather than when the
// scheduler preempts the producer, tens of thousands of values later.
func TestCrowdedQueueLetsTheDeliveryGoroutineRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var q Queue[int]
	delivered := 0
	q.Init(1024, func(int) { delivered++ }, nil)
	const n = 500_000
	for i := range n {
		if q.Push(i) {
			q.Wake()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Wait(ctx); err != nil {
		t.Fatalf("the values were not delivered: %v", err)
	}
	if d := q.Dropped(); d != 0 || delivered != n {
		t.Fatalf("%d values delivered, %d dropped, of %d pushed on one processor; want all delivered", delivered, d, n)
	}
	if q.Close() {
		q.Wake()
	}
}

// The buffers a burst made large are kept while values keep coming (growing
// new ones at each burst makes the garbage that brings the next one), and let
// go once none has come for trimAfter: an idle owner keeps little.
func TestIdleQueueLetsLargeBuffersGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		o := newOwner(0, func(v int) {
			if v == 0 {
				<-release
			}
		}, nil)
		defer o.close()
		o.push(0)
		synctest.Wait() // the handler is stuck on 0: the rest piles up
		for i := 1; i <= 20_000; i++ {
			o.push(i)
		}
		close(release)
		synctest.Wait() // all delivered, the goroutine waits for more
		buffers := func() (spare, buf int) {
			o.q.mu.Lock()
			defer o.q.mu.Unlock()
			return cap(o.q.spare), cap(o.q.buf)
		}
		if spare, _ := buffers(); spare <= idleBuffer {
			t.Fatalf("the buffer of the burst (%d values) was let go at once", spare)
		}
		time.Sleep(trimAfter / 2)
		o.push(-1) // a value within trimAfter: the wait starts again
		synctest.Wait()
		time.Sleep(trimAfter - time.Nanosecond)
		synctest.Wait()
		if spare, buf := buffers(); spare <= idleBuffer && buf <= idleBuffer {
			t.Fatalf("the buffers were let go before %v without a value", trimAfter)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if spare, buf := buffers(); spare > idleBuffer || buf > idleBuffer {
			t.Fatalf("idle for %v with buffers of %d and %d values; want at most %d each", trimAfter, spare, buf, idleBuffer)
		}
	})
}
