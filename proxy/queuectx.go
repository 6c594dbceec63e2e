package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// queueContext is the context of one attempt's wait for a server and a
// connection: its client connection's context, ending at the attempt's
// deadline (the queue's bound, or the operation's maxTimeMS).
//
// What context.WithDeadline makes for each attempt (a timer, four
// allocations, a registration with the client connection's context and its
// removal) is made here only when something waits on the context (Done),
// and then cheaper: a channel, and the reset of a timer made once. An
// attempt that finds a server and an idle connection at once, as most do
// under a moderate load, costs nothing; under a heavy one, every attempt
// waits.
//
// The client connection's context ends at Close (the end of the serving
// goroutine, the other, comes after its last attempt): Close cancels it,
// then calls parentEnded, which closes the channel of an attempt waiting.
//
// A client connection keeps one and resets it for each attempt, which its
// goroutine makes one at a time: nothing keeps the context past its
// attempt (see clientConn.exchange).
type queueContext struct {
	context.Context           // the client connection's
	deadline        time.Time // the attempt's, the owner's alone: Done publishes it to due

	expired atomic.Bool // the deadline passed while something waited

	// done and armed are written by the owner only, under mu: the owner
	// reads them without it (release, most often with nothing to do).
	mu     sync.Mutex    // protects following fields
	due    time.Time     // the deadline the timer was armed for
	done   chan struct{} // made by the attempt's first Done; closed at its deadline or the parent's end
	closed bool          // done is closed
	timer  *time.Timer   // closes done at the deadline: made once, reset by each attempt that waits
	armed  bool          // timer runs for the attempt
}

// reset makes q the context of an attempt ending at deadline, within
// parent.
func (q *queueContext) reset(parent context.Context, deadline time.Time) {
	q.Context, q.deadline = parent, deadline
	q.expired.Store(false)
}

// release ends the attempt: its timer, if armed, is stopped. An attempt
// that nothing waited on costs nothing more.
func (q *queueContext) release() {
	if q.done == nil {
		return // and the timer is not armed
	}
	q.mu.Lock()
	if q.armed {
		q.timer.Stop()
		q.armed = false
	}
	q.done, q.closed = nil, false
	q.mu.Unlock()
}

// Deadline returns the attempt's deadline.
func (q *queueContext) Deadline() (time.Time, bool) { return q.deadline, true }

// Done returns a channel closed when the parent ends or the deadline
// passes; the first call of an attempt makes it and arms the timer.
func (q *queueContext) Done() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done != nil {
		return q.done
	}
	q.done = make(chan struct{})
	q.due = q.deadline
	left := time.Until(q.due)
	switch {
	case q.Context.Err() != nil:
		q.closeLocked()
	case left <= 0:
		q.expired.Store(true)
		q.closeLocked()
	case q.timer == nil:
		q.timer, q.armed = time.AfterFunc(left, q.expire), true
	default:
		q.timer.Reset(left)
		q.armed = true
	}
	return q.done
}

// Err returns why the context ended, or nil. Before anything waited on it
// (Done), a deadline that passed is not seen: no wait has been cut short
// by it, which is all the deadline is for.
func (q *queueContext) Err() error {
	if err := q.Context.Err(); err != nil {
		return err
	}
	if q.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// expire is the timer's: it closes the channel of the attempt whose
// deadline passed. A timer of an earlier attempt that fires late finds
// the deadline of a later one ahead, or no channel, and closes nothing.
func (q *queueContext) expire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done == nil || q.closed || time.Now().Before(q.due) {
		return
	}
	q.expired.Store(true)
	q.closeLocked()
}

// parentEnded closes the channel of the attempt waiting, if any: Close
// calls it once it canceled the parent (the Done of an attempt after that
// sees the parent's end).
func (q *queueContext) parentEnded() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done != nil && !q.closed {
		q.closeLocked()
	}
}

func (q *queueContext) closeLocked() {
	close(q.done)
	q.closed = true
}
