package pool

import (
	"context"
	"fmt"
	"time"
)

// CheckOut returns a connection for the caller's exclusive use, to be given
// back with [Pool.CheckIn]. Prefer [Pool.Do], which cannot forget to.
//
// An idle connection is reused when there is one; otherwise a new one is
// established when maxPoolSize and maxConnecting allow, and the check-out
// waits its turn in a FIFO queue when they do not. It fails with a
// [*PoolClosedError] on a closed pool, a retryable [*PoolClearedError] on a
// paused one, a [*WaitQueueTimeoutError] when ctx, waitQueueTimeoutMS or
// timeoutMS ends the wait, and a [*ConnectionError] when the establishment it
// waited for failed.
func (p *Pool) CheckOut(ctx context.Context) (*Conn, error) {
	return p.checkOut(ctx, nil) // inlined: the caller calls checkOut
}

// checkOut is CheckOut and the check-out of Do; site is the call site the
// leak detector keeps, nil until checkOutTraced took it.
func (p *Pool) checkOut(ctx context.Context, site *[]uintptr) (*Conn, error) {
	if site == nil && p.cfg.leakFrames > 0 {
		return p.checkOutTraced(ctx)
	}
	var start mono // when the check-out began, if the clock was read
	observed := p.observed()
	if observed || p.timeAll {
		// Every check-out is timed: read the clock before the lock rather
		// than under it.
		start = p.clock()
	}
	// Err rather than Done: a context may make its Done channel (and a
	// timer) only when asked for it, which a check-out that does not wait
	// has no need to.
	if ctx.Err() != nil {
		return nil, p.checkOutDone(ctx, start)
	}

	// The wait queue serves check-outs in the order they arrived, which the
	// CheckOutStarted events show. A check-out that gets the lock at once has
	// nobody ahead of it: its event is queued under the lock. One that must
	// wait for the lock, which sync.Mutex may hand to a later check-out
	// first, queues its event now, and its place among the events (its
	// ticket) is its place in the wait queue.
	var ticket uint64
	queued := false // its CheckOutStarted event is queued
	waited := false
	if !p.mu.TryLock() {
		if observed {
			ticket, queued = p.queueStarted(), true
			if p.testHookStarted != nil {
				p.testHookStarted()
			}
		}
		start, waited = p.lockCheckOut(start)
	}
	wake := false
	// The fast path: ready, nobody ahead, an idle connection on top that has
	// not perished. Everything else goes the slow way.
	if p.state == stateReady && p.waiting == 0 {
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			if reason, _ := p.perishedLocked(c); reason == "" {
				p.idle[n-1] = nil
				p.idle = p.idle[:n-1]
				at := start // 0 unless the clock was read: then as good as now
				if waited {
					at = p.clock()
					p.counts.checkOutWait.observe(time.Duration(at - start))
				} else {
					p.counts.immediate++
				}
				// checkOutLocked, in line: most check-outs cost a
				// decrement here.
				p.countCheckOutLocked(c)
				if p.sampler.skip > 0 {
					p.sampler.skip--
				} else {
					p.timeCheckOutLocked(c, at, site)
				}
				if observed {
					out := p.event(ConnectionCheckedOut, c, start, "", nil)
					_, wake = p.queueStartedLocked(queued, &out)
				}
				p.unlockAndWake(wake)
				return c, nil
			}
		}
	}
	if observed {
		var t uint64
		if t, wake = p.queueStartedLocked(queued, nil); !queued {
			ticket = t
		}
	}
	return p.checkOutSlow(ctx, start, waited, site, ticket, wake)
}

// lockCheckOut takes the pool's lock for a check-out that did not get it at
// once, as lock does, and reports whether the check-out had to wait for it.
// A check-out that gets it within the spin has waited well under a
// microsecond, which its wait does not count; one that waits longer is timed
// from here if start is 0.
func (p *Pool) lockCheckOut(start mono) (mono, bool) {
	for range spinTries {
		if p.mu.TryLock() {
			return start, false
		}
	}
	if start == 0 {
		start = p.clock()
	}
	p.mu.Lock()
	return start, true
}

// checkOutDone fails a check-out whose context was done before it began.
func (p *Pool) checkOutDone(ctx context.Context, start mono) error {
	p.mu.Lock()
	_, wake := p.queueStartedLocked(false, nil)
	p.checkOutFailedLocked(start, false, true)
	err := p.timeoutErrorLocked(ctx.Err(), 0, BottleneckNone, nil)
	if p.checkOutFailedEventLocked(start, err) {
		wake = true
	}
	p.unlockAndWake(wake)
	return err
}

// checkOutSlow is CheckOut past the fast path; it is called with the lock
// held and releases it. waited says whether the check-out waited for the
// lock, start is when it began if the clock was read; ticket its place in
// line when observed (see checkOut), 0 otherwise; wake whether the delivery
// goroutine is to be woken.
func (p *Pool) checkOutSlow(ctx context.Context, start mono, waited bool, site *[]uintptr, ticket uint64, wake bool) (*Conn, error) {
	var err error
	switch p.state {
	case statePoolClosed:
		err = &PoolClosedError{Address: p.address}
	case statePaused:
		err = &PoolClearedError{Address: p.address, Cause: p.clearCause}
	}
	if err != nil {
		p.checkOutFailedLocked(start, waited, false)
		if p.checkOutFailedEventLocked(start, err) {
			wake = true
		}
		p.unlockAndWake(wake)
		return nil, err
	}
	ob := outbox{wakeEvents: wake}
	if p.waiting == 0 {
		// Perished connections closed on the way may leave the pool below
		// minPoolSize: releaseLocked asks the maintenance to make up for them.
		if c := p.takeIdleLocked(&ob); c != nil {
			at := start
			if waited {
				at = p.clock()
				p.counts.checkOutWait.observe(time.Duration(at - start))
			} else {
				p.counts.immediate++
			}
			p.checkOutLocked(c, at, site)
			ob.direct, ob.directStart = c, start
			p.releaseLocked(&ob)
			return c, nil
		}
	}
	// It waits: its wait is timed.
	if start == 0 {
		start = p.clock()
	}
	w := p.getWaiter()
	w.ticket, w.start, w.queued = ticket, start, p.cfg.waitQueueTimeout
	keepSite(&w.site, site)
	p.queue.push(w)
	p.waiting++
	p.releaseLocked(&ob)
	return p.await(ctx, w, start)
}

// await waits for w's result or for the first time limit to end the wait.
// The wait is timed from w.start, when the check-out began.
func (p *Pool) await(ctx context.Context, w *waiter, start mono) (*Conn, error) {
	done := ctx.Done()
	if done == nil && w.queued <= 0 && p.cfg.timeout <= 0 {
		// Nothing can end the wait but its result: a plain receive is
		// cheaper than the select below.
		<-w.ch
		return p.received(w, start)
	}
	began := p.epoch.Add(time.Duration(w.start - 1)) // w.start as a time, for the deadlines
	// waitQueueTimeoutMS limits the wait in the queue only: a check-out whose
	// own connection is being established is past it. timeoutMS and the
	// context limit the whole check-out.
	var queueDeadline, totalDeadline time.Time
	if d := w.queued; d > 0 {
		queueDeadline = began.Add(d)
	}
	if d := p.cfg.timeout; d > 0 {
		totalDeadline = began.Add(d)
	}
	timer := armTimer(w, queueDeadline, totalDeadline)
	// The timer belongs to w, which is recycled once received: stop it first.
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
	}

	for {
		var limit error
		select {
		case <-w.ch:
			stop()
			return p.received(w, start)
		case <-done:
			limit = ctx.Err()
		case now := <-timerChan(timer):
			limit = errTimeoutMS
			if totalDeadline.IsZero() || now.Before(totalDeadline) {
				limit = errWaitQueueTimeout
			}
		}

		p.mu.Lock()
		if w.state == waiterDelivered {
			// The result won the race against the limit: take it.
			p.mu.Unlock()
			stop()
			<-w.ch
			return p.received(w, start)
		}
		if limit == errWaitQueueTimeout && p.queue.rank(w) < p.forWaiters {
			// Its connection is being established: the queue wait is over.
			p.mu.Unlock()
			queueDeadline = time.Time{}
			timer = armTimer(w, queueDeadline, totalDeadline)
			continue
		}
		// What held it up is read before it leaves the queue: its rank
		// there tells.
		bottleneck, clearCause := p.bottleneckLocked(w)
		w.state = waiterCanceled
		p.waiting--
		if p.waiting == 0 || p.queue.len() > 2*p.waiting+64 {
			p.queue.compact()
		}
		now := p.clock()
		waited := time.Duration(now - w.start)
		p.counts.checkOutWait.observe(waited)
		p.counts.checkOutFailed++
		p.counts.timeouts++
		err := p.timeoutErrorLocked(limit, waited, bottleneck, clearCause)
		p.unlockAndWake(p.checkOutFailedEventLocked(start, err))
		stop()
		p.counts.waited(waited)
		return nil, err
	}
}

// Limits of a check-out other than the context's.
var (
	errWaitQueueTimeout = fmt.Errorf("waitQueueTimeoutMS")
	errTimeoutMS        = fmt.Errorf("timeoutMS")
)

// armTimer sets w's timer to the earliest deadline; nil if there is none.
func armTimer(w *waiter, a, b time.Time) *time.Timer {
	d := a
	if d.IsZero() || !b.IsZero() && b.Before(d) {
		d = b
	}
	if d.IsZero() {
		return nil
	}
	if w.timer == nil {
		w.timer = time.NewTimer(time.Until(d))
	} else {
		w.timer.Reset(time.Until(d))
	}
	return w.timer
}

func timerChan(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// received completes a check-out whose result was delivered. Its
// ConnectionCheckedOut event is already out: the deliverer emitted it, and
// counted the check-out or its failure.
func (p *Pool) received(w *waiter, start mono) (*Conn, error) {
	c, err, waited := w.conn, w.err, time.Duration(w.handed-w.start)
	p.putWaiter(w)
	p.counts.waited(waited)
	// The outcome's event was queued by the goroutine that gave it.
	return c, err
}

// timeoutErrorLocked describes a check-out that gave up, with the state of the
// pool that held it up, and the flight recorder's events if it is on.
func (p *Pool) timeoutErrorLocked(limit error, waited time.Duration, b Bottleneck, clearCause error) *WaitQueueTimeoutError {
	e := p.timeoutError(limit, waited)
	e.InUse, e.Pending, e.Waiting = p.inUse, p.pending, p.waiting
	e.EstablishFailures, e.LastEstablishError = p.backoff.failures, p.backoff.last
	e.Bottleneck, e.ClearCause = b, clearCause
	if p.rec.ring != nil {
		e.RecentEvents = p.recentEventsLocked()
	}
	return e
}

// bottleneckLocked names the limit that holds the waiting check-out w up,
// the most fundamental first: a pool paused by a clear can serve it with
// nothing but the connection being established for it. Otherwise the
// establishments under way go to the waiters in order: one of them is for w
// if fewer waiters are ahead of it than there are establishments, whatever
// the limits. If none is, w waits for room under maxPoolSize, for the end of
// a backoff, or for its turn under maxConnecting.
func (p *Pool) bottleneckLocked(w *waiter) (Bottleneck, error) {
	switch {
	case p.state == statePaused:
		return BottleneckPaused, p.clearCause
	case p.queue.rank(w) < p.pending:
		return BottleneckEstablishing, nil
	case p.cfg.maxPoolSize > 0 && len(p.conns) >= p.cfg.maxPoolSize:
		return BottleneckMaxPoolSize, nil
	case p.backingOffLocked():
		return BottleneckBackoff, nil
	case p.pending >= p.cfg.maxConnecting:
		return BottleneckMaxConnecting, nil
	}
	return BottleneckNone, nil
}

func (p *Pool) timeoutError(limit error, waited time.Duration) *WaitQueueTimeoutError {
	e := &WaitQueueTimeoutError{
		Address:       p.address,
		Waited:        waited,
		MaxPoolSize:   p.cfg.maxPoolSize,
		MaxConnecting: p.cfg.maxConnecting,
		cause:         context.DeadlineExceeded,
	}
	switch limit {
	case context.Canceled:
		e.Limit, e.cause = "context canceled", context.Canceled
	case context.DeadlineExceeded:
		e.Limit = "context deadline"
	default:
		e.Limit = limit.Error()
	}
	return e
}

// checkOutFailedEventLocked queues the ConnectionCheckOutFailed event of a
// check-out that failed with err, begun at start (the failure was counted
// where it was decided); it reports whether the delivery goroutine is to be
// woken.
func (p *Pool) checkOutFailedEventLocked(start mono, err error) (wake bool) {
	return p.emitLocked(ConnectionCheckOutFailed, nil, start, checkOutFailedReason(err), err)
}

// checkOutFailedReason is the reason of the ConnectionCheckOutFailed event of
// a check-out that failed with err.
func checkOutFailedReason(err error) string {
	switch err.(type) {
	case *PoolClosedError:
		return ReasonPoolClosed
	case *WaitQueueTimeoutError:
		return ReasonTimeout
	}
	return ReasonConnectionError
}

// Do checks a connection out, calls fn with it and checks it back in, whatever
// fn does: this is the way to use the pool. It returns the check-out's error
// or fn's. If a clear with interruptInUseConnections interrupted the
// connection while fn ran, Do returns the retryable [*PoolClearedError] that
// says so instead of fn's error. If fn panics, the connection is closed rather
// than reused, and the panic goes on.
func (p *Pool) Do(ctx context.Context, fn func(*Conn) error) (err error) {
	c, err := p.checkOut(ctx, nil)
	if err != nil {
		return err
	}
	returned := false
	defer func() {
		if !returned {
			p.mu.Lock()
			c.broken = fmt.Errorf("mongopool: panic while connection %d was in use", c.id)
			p.mu.Unlock()
			p.CheckIn(c)
		}
	}()
	err = fn(c)
	returned = true
	if err != nil {
		if ie := c.Err(); ie != nil {
			err = ie
		}
	}
	if cerr := p.CheckIn(c); err == nil {
		err = cerr
	}
	return err
}
