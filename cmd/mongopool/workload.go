package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// workload is a number of goroutines running operations through the pool
// back to back, each operation holding its connection for about hold.
type workload struct {
	pool       *pool.Pool
	goroutines int
	hold       time.Duration

	ops atomic.Int64 // operations finished, for the progress line

	mu      sync.Mutex // guards the results merged by the workers
	results results
}

// results is what the workload saw, by its own measure.
type results struct {
	latency     histogram // time from calling Do to holding a connection
	ok          int64     // operations that ran to the end
	interrupted int64     // ran, but a clear with interruptInUse closed their connection
	opCanceled  int64     // ran, but stopped early by Ctrl-C or the drain limit

	// Check-outs that failed, by cause.
	timeouts   int64 // a time limit of the pool (waitQueueTimeout) ended the wait
	cleared    int64 // the pool was paused by a clear
	connErrors int64 // the connection established for it failed
	canceled   int64 // the context ended the wait (Ctrl-C, drain limit)
	other      int64
	retryable  int64 // of the failed check-outs, those labelled RetryableError
	overloaded int64 // ... and those labelled SystemOverloadedError
	lastErr    error // the last failed check-out's error, as an example
}

func (r *results) failedCheckOuts() int64 {
	return r.timeouts + r.cleared + r.connErrors + r.canceled + r.other
}

// run starts the workers. They start operations while running is not done;
// each operation runs under ctx, which bounds the last ones. run returns
// when every worker has finished its last operation.
func (w *workload) run(running, ctx context.Context) {
	var wg sync.WaitGroup
	for range w.goroutines {
		wg.Go(func() {
			var r results
			for running.Err() == nil {
				ok := w.operation(ctx, &r)
				w.ops.Add(1)
				if !ok {
					pause(ctx, failurePause)
				}
			}
			w.mu.Lock()
			w.results.merge(&r)
			w.mu.Unlock()
		})
	}
	wg.Wait()
}

// failurePause is how long a worker waits after a failed check-out before its
// next operation, as a driver backs off (or waits for server selection) rather
// than spin on a paused pool.
const failurePause = time.Millisecond

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// operation is one use of the pool, the way an application uses it: p.Do
// checks a connection out, runs the function and checks it back in. It
// reports whether the check-out succeeded.
func (w *workload) operation(ctx context.Context, r *results) bool {
	start := time.Now()
	ran := false
	err := w.pool.Do(ctx, func(c *pool.Conn) error {
		ran = true
		r.latency.record(time.Since(start))
		return c.Link().(*simLink).RoundTrip(ctx, w.holdTime())
	})
	if ran {
		switch {
		case err == nil:
			r.ok++
		case errors.Is(err, pool.ErrPoolCleared): // Do reports the interrupt
			r.interrupted++
		default:
			r.opCanceled++
		}
		return true
	}

	switch {
	case errors.Is(err, context.Canceled):
		r.canceled++
	case errors.Is(err, pool.ErrWaitQueueTimeout):
		r.timeouts++
	case errors.Is(err, pool.ErrPoolCleared):
		r.cleared++
	case errors.As(err, new(*pool.ConnectionError)):
		r.connErrors++
	default:
		r.other++
	}
	if pool.HasErrorLabel(err, pool.LabelRetryable) {
		r.retryable++
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		r.overloaded++
	}
	r.lastErr = err
	return false
}

// holdTime returns how long an operation keeps its connection: hold, give or
// take half of it.
func (w *workload) holdTime() time.Duration {
	if w.hold <= 0 {
		return 0
	}
	return w.hold/2 + rand.N(w.hold)
}

func (r *results) merge(o *results) {
	r.latency.merge(&o.latency)
	r.ok += o.ok
	r.interrupted += o.interrupted
	r.opCanceled += o.opCanceled
	r.timeouts += o.timeouts
	r.cleared += o.cleared
	r.connErrors += o.connErrors
	r.canceled += o.canceled
	r.other += o.other
	r.retryable += o.retryable
	r.overloaded += o.overloaded
	if o.lastErr != nil {
		r.lastErr = o.lastErr
	}
}
