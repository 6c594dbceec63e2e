// Package deliver hands values (events, log records) to user code on a
// goroutine of their own, in the order they were pushed, so that the code
// producing them (a pool's check-out, a topology update, a monitor) never
// waits for a user's handler, and a handler may call its producer back (even
// close it) without knowing which goroutine it runs on.
//
// The owner pushes while holding the lock it already holds for the change the
// value reports, so that values are delivered in the order of the changes,
// whichever goroutines made them. The queue has a small lock of its own,
// taken inside the owner's for a push and by the delivery goroutine for a
// whole batch, so that delivering never contends for the owner's lock. A push
// costs an append; it never blocks for long and never runs user code. When the
// handler falls behind by more than the queue's limit, the values pushed
// meanwhile are dropped and counted, so that a stuck handler costs bounded
// memory and nothing else.
package deliver

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLimit is the number of values a queue holds, undelivered, before it
// drops new ones.
const DefaultLimit = 1 << 16

// Queue delivers the values pushed to it, in order, to its handler, on a
// goroutine that starts with the first push. Until the queue is closed, the
// goroutine waits for more values when it has delivered those pushed; once
// closed, it ends when it has, and a later push starts another one, which
// ends likewise: an owner that still reports a few things after its Close
// (a call that fails because it is closed) leaves no goroutine behind.
//
// Push is called with the owner's lock held (see the package documentation);
// the other methods need no lock of the owner's.
type Queue[T any] struct {
	// The padding keeps the queue's state, which the delivery goroutine
	// writes, off the cache lines of its owner's fields, which the
	// producer writes: sharing them makes every push and every delivery
	// wait for the other core.
	_       [cacheLine]byte
	handler func(T)
	limit   int
	// onDrop, if set, is called by the delivery goroutine (no lock held)
	// with the number of values dropped since it was last called.
	onDrop func(n uint64)

	mu    sync.Mutex // protects following fields
	buf   []T        // pushed, not yet taken by the delivery goroutine
	spare []T        // the buffer of the last batch, reused for the next one
	// pushed and delivered count values; dropped counts those the limit
	// turned away (not counted in pushed); reported is the part of dropped
	// that onDrop was told of.
	pushed, delivered, dropped, reported uint64
	// tickets counts the pushes, dropped ones included: see PushTicket.
	tickets uint64
	// crowdedPushes counts the pushes since the last one that asked for a
	// yield while the queue was crowded; yield tells Wake to yield (see
	// Wake), and is set under mu, taken without it.
	crowdedPushes int
	yield         atomic.Bool
	running       bool          // the delivery goroutine runs
	idle          bool          // it waits for wake
	closed        bool          // the owner is closed: the goroutine ends when it has nothing to deliver
	wake          chan struct{} // buffered: ends the delivery goroutine's wait
	// progress is closed, and forgotten, once the delivery goroutine has
	// delivered a batch or ended: Wait waits on it. nil until needed.
	progress chan struct{}
	_        [cacheLine]byte
}

// cacheLine is at least the size of a cache line, with the adjacent line
// that x86 processors fetch along with it.
const cacheLine = 128

// Init readies q (a zero Queue, typically a field of its owner) to deliver to
// handler, holding at most limit undelivered values (DefaultLimit when limit
// <= 0). onDrop, if not nil, hears of values dropped, from the delivery
// goroutine, between deliveries.
func (q *Queue[T]) Init(limit int, handler func(T), onDrop func(n uint64)) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	q.handler, q.limit, q.onDrop = handler, limit, onDrop
	q.wake = make(chan struct{}, 1)
}

// Push queues v; the caller holds the lock that orders the changes the
// values report. It returns true when the delivery goroutine must be woken,
// or the queue is crowded: the caller then calls Wake once it has released
// its lock, so that the scheduler's work is not done under it. A value pushed
// beyond the limit is dropped.
func (q *Queue[T]) Push(v T) (wake bool) {
	_, wake = q.PushTicket(v)
	return wake
}

// PushTicket is Push that also returns the value's place among all the values
// pushed (dropped ones included), from 1: a caller that pushes without the
// lock that orders the changes (an arrival, which takes that lock next) gets
// an order to keep, the one its value has in the queue.
func (q *Queue[T]) PushTicket(v T) (ticket uint64, wake bool) {
	return q.PushAll(v)
}

// PushAll is PushTicket for several values at once, in order, under one
// acquisition of the queue's lock; it returns the first one's ticket.
func (q *Queue[T]) PushAll(vs ...T) (ticket uint64, wake bool) {
	q.mu.Lock()
	ticket = q.tickets + 1
	for _, v := range vs {
		q.tickets++
		if len(q.buf) >= q.limit {
			q.dropped++
			continue
		}
		q.buf = append(q.buf, v)
		q.pushed++
		if q.startLocked() {
			wake = true
		}
		if len(q.buf) >= q.limit/crowdedShare {
			if q.crowdedPushes++; q.crowdedPushes >= max(q.limit/yieldEvery, 1) {
				q.crowdedPushes = 0
				q.yield.Store(true)
				wake = true
			}
		}
	}
	q.mu.Unlock()
	return ticket, wake
}

// A queue is crowded when a quarter of its limit is undelivered; while it
// is, one push in a sixty-fourth of the limit (1,024 by default) makes Wake
// yield: see Wake.
const (
	crowdedShare = 4
	yieldEvery   = 64
)

// startLocked starts the delivery goroutine, or reports whether it waits and
// must be woken.
func (q *Queue[T]) startLocked() (wake bool) {
	if !q.running {
		q.running = true
		go q.run()
		return false
	}
	if q.idle {
		q.idle = false
		return true
	}
	return false
}

// Wake ends the delivery goroutine's wait, when Push or Close said so. It does
// not block, but now and then, while the queue is crowded (a quarter of its
// limit undelivered), it yields the processor once: when the producers keep
// every processor busy (GOMAXPROCS=1 and a caller in a loop are enough), the
// delivery goroutine would otherwise wait for the scheduler to preempt one of
// them, and the values pushed meanwhile, tens of thousands, would be
// dropped. Yielding at every push would cost a producer more than the push
// when the handler is merely slow, on a processor of its own.
func (q *Queue[T]) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if q.yield.Load() && q.yield.Swap(false) {
		runtime.Gosched()
	}
}

// Close tells q that its owner is closed: the delivery goroutine ends once it
// has delivered what was pushed, and so does any goroutine a later push
// starts. Like Push, it returns true when the caller must call Wake after
// releasing its lock.
func (q *Queue[T]) Close() (wake bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	if q.running && q.idle {
		q.idle = false
		return true
	}
	return false
}

// Dropped returns the number of values dropped so far.
func (q *Queue[T]) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Pending returns the number of values pushed and not delivered yet.
func (q *Queue[T]) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int(q.pushed - q.delivered)
}

// Wait returns once every value pushed before the call has been delivered (a
// handler's return ends its value's delivery), or with ctx's error when ctx
// ends first. Called from the handler itself, it waits until ctx ends: the
// values after the one being delivered wait for its handler to return.
func (q *Queue[T]) Wait(ctx context.Context) error {
	q.mu.Lock()
	target := q.pushed
	for q.delivered < target {
		if q.progress == nil {
			q.progress = make(chan struct{})
		}
		ch := q.progress
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		q.mu.Lock()
	}
	q.mu.Unlock()
	return nil
}

// run is the delivery goroutine: it takes the values pushed, a batch at a
// time, and hands them to the handler without the lock.
//
// After a batch, it yields the processor a few times (spin, adapted to the
// stream) before it looks for the next one: during a steady stream more
// values arrive meanwhile, and taking them in larger batches spares the
// producer a fight for the queue's lock and cache lines at every push, which
// would cost it more than the push itself. When the yields find nothing new,
// spin comes down, and a stream that has stopped lets the goroutine park at
// once.
func (q *Queue[T]) run() {
	spin := 0
	var trim *time.Timer // see parkThenTrim
	q.mu.Lock()
	for {
		if len(q.buf) == 0 {
			if q.closed {
				q.running = false
				q.progressedLocked()
				q.mu.Unlock()
				return
			}
			q.idle = true
			large := cap(q.spare) > idleBuffer || cap(q.buf) > idleBuffer
			q.mu.Unlock()
			if large {
				trim = q.parkThenTrim(trim)
			} else {
				<-q.wake
			}
			q.mu.Lock()
			continue
		}
		batch := q.buf
		q.buf = q.spare[:0]
		q.spare = nil
		dropped := q.dropped - q.reported
		q.reported = q.dropped
		q.mu.Unlock()

		if dropped > 0 && q.onDrop != nil {
			q.onDrop(dropped)
		}
		var zero T
		for i := range batch {
			q.handler(batch[i])
			batch[i] = zero // nothing kept alive by the buffer
		}
		for range spin {
			runtime.Gosched()
		}

		q.mu.Lock()
		q.delivered += uint64(len(batch))
		// The buffer is kept for the next batch: a steady stream then
		// allocates nothing (see parkThenTrim for when it goes).
		q.spare = batch[:0]
		q.progressedLocked()
		if len(q.buf) > 0 {
			spin = min(2*spin+1, maxSpin)
		} else {
			spin /= 2
		}
	}
}

// parkThenTrim waits for a wake like the idle delivery goroutine does, and
// lets go of the buffers a burst made large if none comes within trimAfter;
// it returns the timer it used, for the next time.
//
// The buffers are kept while the stream goes on, even large: a burst (a
// handler that stalls, or a collection that holds the delivery goroutine
// back for a millisecond) would otherwise have the producer grow new ones
// from nothing at the next, and the garbage they make brings the next
// collection, hence the next burst, sooner: a busy pool caught in that cycle
// ran a fifth slower. The queue's limit bounds them meanwhile.
func (q *Queue[T]) parkThenTrim(trim *time.Timer) *time.Timer {
	if trim == nil {
		trim = time.NewTimer(trimAfter)
	} else {
		trim.Reset(trimAfter)
	}
	select {
	case <-q.wake:
		trim.Stop()
		return trim
	case <-trim.C:
	}
	q.mu.Lock()
	if q.idle { // no push came meanwhile
		q.trimLocked()
	}
	q.mu.Unlock()
	<-q.wake
	return trim
}

// trimLocked lets the buffers larger than idleBuffer values go.
func (q *Queue[T]) trimLocked() {
	if cap(q.spare) > idleBuffer {
		q.spare = nil
	}
	if len(q.buf) == 0 && cap(q.buf) > idleBuffer {
		q.buf = nil
	}
}

// An idle queue keeps buffers of at most idleBuffer values once trimAfter
// has passed without a value: see parkThenTrim.
const (
	idleBuffer = 1 << 12
	trimAfter  = time.Second
)

// maxSpin bounds the yields of the delivery goroutine before it parks: a few
// microseconds.
const maxSpin = 32

// progressedLocked wakes the callers of Wait.
func (q *Queue[T]) progressedLocked() {
	if q.progress != nil {
		close(q.progress)
		q.progress = nil
	}
}
