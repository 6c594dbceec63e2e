package pool

import (
	"slices"
	"time"
)

// waiterState says where a waiting check-out stands. The pool's lock guards
// it, so that delivering a result and giving up agree on a single winner: a
// result is only ever given to a waiter still waiting, and a waiter only gives
// up if no result was given to it.
type waiterState uint8

const (
	waiterWaiting   waiterState = iota
	waiterDelivered             // conn or err is set; ch is (or is about to be) signalled
	waiterCanceled              // gave up; dropped from the queue lazily
)

// A waiter is a check-out waiting in the queue.
type waiter struct {
	ch     chan struct{} // one slot: signalled once, when the result is set
	timer  *time.Timer   // the wait's time limit, kept across reuses
	ticket uint64        // its place in CheckOutStarted order; 0 when unobserved
	start  mono          // when its check-out started
	handed mono          // when it was given its result (guarded by pool.mu until then)
	site   []uintptr     // the call site of its check-out, for the leak detector
	queued time.Duration // waitQueueTimeoutMS when it was queued: Reconfigure may change the pool's

	// Guarded by pool.mu.
	state waiterState
	conn  *Conn
	err   error
}

// getWaiter returns a waiter ready to be queued, recycled when possible.
// Waiters are recycled per pool, not process-wide, so that each one's channel
// and timer stay with the goroutines that made them.
func (p *Pool) getWaiter() *waiter {
	if w, ok := p.waiters.Get().(*waiter); ok {
		return w
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

// putWaiter recycles a waiter whose result was delivered and received; a
// canceled waiter may still sit in the queue and is left to the collector.
func (p *Pool) putWaiter(w *waiter) {
	w.state, w.conn, w.err, w.ticket, w.start, w.site = waiterWaiting, nil, nil, 0, 0, w.site[:0]
	p.waiters.Put(w)
}

// waitQueue is a FIFO of waiters as two slices: pushes go to tail, pops come
// from head, and when head runs out the two swap, so that the queue reuses its
// memory instead of growing a slice forever. Waiters that gave up stay until
// they reach the front (or a compaction) and are skipped there.
type waitQueue struct {
	head    []*waiter
	headPos int
	tail    []*waiter
}

func (q *waitQueue) len() int { return len(q.head) - q.headPos + len(q.tail) }

// push queues w last, or, if it has a ticket, ahead of the waiters with later
// tickets that took the pool's lock before it: the queue then serves
// check-outs in the order their CheckOutStarted events were emitted. A
// waiter without a ticket (nobody listened) stops the search: the lock's
// order is all there is to go by then.
func (q *waitQueue) push(w *waiter) {
	q.tail = append(q.tail, w)
	if w.ticket == 0 {
		return
	}
	i := len(q.tail) - 1
	for ; i > 0 && q.tail[i-1].ticket > w.ticket; i-- {
		q.tail[i] = q.tail[i-1]
	}
	q.tail[i] = w
	if i > 0 {
		return
	}
	// At the front of tail: it may belong further up, in head (rare: it
	// lost the race for the lock to a whole swap's worth of waiters).
	j := len(q.head)
	for j > q.headPos && q.head[j-1].ticket > w.ticket {
		j--
	}
	if j < len(q.head) {
		copy(q.tail, q.tail[1:])
		q.tail = q.tail[:len(q.tail)-1]
		q.head = slices.Insert(q.head, j, w)
	}
}

// popFront removes and returns the oldest waiter, live or not; nil if empty.
func (q *waitQueue) popFront() *waiter {
	if q.headPos >= len(q.head) {
		if len(q.tail) == 0 {
			return nil
		}
		q.head, q.headPos, q.tail = q.tail, 0, q.head[:0]
	}
	w := q.head[q.headPos]
	q.head[q.headPos] = nil
	q.headPos++
	return w
}

// popLive removes and returns the oldest waiter still waiting, dropping the
// ones that gave up on the way.
func (q *waitQueue) popLive() *waiter {
	for {
		w := q.popFront()
		if w == nil || w.state == waiterWaiting {
			return w
		}
	}
}

// each calls fn for every queued waiter, oldest first.
func (q *waitQueue) each(fn func(*waiter)) {
	for _, w := range q.head[q.headPos:] {
		fn(w)
	}
	for _, w := range q.tail {
		fn(w)
	}
}

// rank returns how many live waiters are ahead of w.
func (q *waitQueue) rank(w *waiter) int {
	n, found := 0, false
	q.each(func(x *waiter) {
		switch {
		case found:
		case x == w:
			found = true
		case x.state == waiterWaiting:
			n++
		}
	})
	return n
}

// compact drops the waiters that are no longer waiting.
func (q *waitQueue) compact() {
	live := q.tail[:0:0]
	q.each(func(w *waiter) {
		if w.state == waiterWaiting {
			live = append(live, w)
		}
	})
	clear(q.head)
	clear(q.tail)
	q.head, q.headPos, q.tail = live, 0, q.head[:0]
}
