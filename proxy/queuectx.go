package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// queueContext is the context of one attempt's wait for a server and a
// connection: its client connection's context, ending at the attempt's
// deadline (the queue's bound, or the operation's maxTimeMS). The timer of
// that deadline is made only when something waits on the context (Done):
// an attempt that finds a server and an idle connection at once, as most
// do, costs no timer, no allocation and no registration with the client
// connection's context, which context.WithDeadline would cost each time.
//
// A client connection keeps one and resets it for each attempt, which its
// goroutine makes one at a time: nothing keeps the context past its
// attempt (see clientConn.exchange).
type queueContext struct {
	context.Context // the client connection's
	deadline        time.Time

	timed atomic.Pointer[timedContext] // made by the first Done
	mu    sync.Mutex                   // serializes the making of timed
}

// timedContext is a queueContext's deadline made a context.
type timedContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// reset makes q the context of an attempt ending at deadline, within
// parent.
func (q *queueContext) reset(parent context.Context, deadline time.Time) {
	q.Context, q.deadline = parent, deadline
}

// release ends the attempt: the timer, if one was made, is stopped.
func (q *queueContext) release() {
	if t := q.timed.Swap(nil); t != nil {
		t.cancel()
	}
}

// Deadline returns the attempt's deadline.
func (q *queueContext) Deadline() (time.Time, bool) { return q.deadline, true }

// Done returns a channel closed when the parent ends or the deadline
// passes, making the deadline's timer on the first call.
func (q *queueContext) Done() <-chan struct{} {
	if t := q.timed.Load(); t != nil {
		return t.ctx.Done()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.timed.Load()
	if t == nil {
		t = new(timedContext)
		t.ctx, t.cancel = context.WithDeadline(q.Context, q.deadline)
		q.timed.Store(t)
	}
	return t.ctx.Done()
}

// Err returns why the context ended, or nil. Before anything waited on it
// (Done), a deadline that passed is not seen: no wait has been cut short
// by it, which is all the deadline is for.
func (q *queueContext) Err() error {
	if t := q.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	return q.Context.Err()
}
