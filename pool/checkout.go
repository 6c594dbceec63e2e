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
	var ticket uint64
	if p.observed() {
		// The ticket is taken just before the event, so that the queue can
		// follow the order the events show even when the pool's lock lets a
		// later check-out in first.
		start, ticket = p.clock(), p.tickets.Add(1)
		p.emit(ConnectionCheckOutStarted, nil, 0, "", nil)
	} else if p.timeAll {
		// Every check-out is timed: read the clock before the lock rather
		// than under it.
		start = p.clock()
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return nil, p.checkOutDone(ctx, start)
		default:
		}
	}

	waited := false
	if !p.mu.TryLock() {
		start, waited = p.lockCheckOut(start)
	}
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
				p.mu.Unlock()
				p.emit(ConnectionCheckedOut, c, start, "", nil)
				return c, nil
			}
		}
	}
	return p.checkOutSlow(ctx, start, waited, ticket, site)
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
	p.checkOutFailedLocked(start, false, true)
	err := p.timeoutErrorLocked(ctx.Err(), 0, BottleneckNone, nil)
	p.mu.Unlock()
	return p.checkOutFailed(start, err)
}

// checkOutSlow is CheckOut past the fast path; it is called with the lock
// held and releases it. waited says whether the check-out waited for the
// lock, start is when it began if the clock was read.
func (p *Pool) checkOutSlow(ctx context.Context, start mono, waited bool, ticket uint64, site *[]uintptr) (*Conn, error) {
	switch p.state {
	case statePoolClosed:
		p.checkOutFailedLocked(start, waited, false)
		p.mu.Unlock()
		return nil, p.checkOutFailed(start, &PoolClosedError{Address: p.address})
	case statePaused:
		p.checkOutFailedLocked(start, waited, false)
		err := &PoolClearedError{Address: p.address, Cause: p.clearCause}
		p.mu.Unlock()
		return nil, p.checkOutFailed(start, err)
	}
	var ob outbox
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
			p.releaseLocked(&ob)
			p.emit(ConnectionCheckedOut, c, start, "", nil)
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
		p.mu.Unlock()
		stop()
		p.counts.waited(waited)
		return nil, p.checkOutFailed(start, err)
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
	if err != nil {
		return nil, p.checkOutFailed(start, err)
	}
	return c, nil
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

// checkOutFailed emits ConnectionCheckOutFailed for err and returns it; the
// failure was counted under the lock, where it was decided.
func (p *Pool) checkOutFailed(start mono, err error) error {
	reason := ReasonConnectionError
	switch err.(type) {
	case *PoolClosedError:
		reason = ReasonPoolClosed
	case *WaitQueueTimeoutError:
		reason = ReasonTimeout
	}
	p.emit(ConnectionCheckOutFailed, nil, start, reason, err)
	return err
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
