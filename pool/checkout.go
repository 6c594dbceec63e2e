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
	var start time.Time
	var ticket uint64
	if p.observed() {
		// The ticket is taken just before the event, so that the queue can
		// follow the order the events show even when the pool's lock lets a
		// later check-out in first.
		start, ticket = p.now(), p.tickets.Add(1)
		p.emit(ConnectionCheckOutStarted, nil, zeroTime, "", nil)
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return nil, p.checkOutFailed(start, p.timeoutError(ctx.Err(), 0))
		default:
		}
	}

	p.lock()
	// The fast path: ready, nobody ahead, an idle connection on top that has
	// not perished. Everything else goes the slow way.
	if p.state == stateReady && p.waiting == 0 {
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			if reason, _ := p.perishedLocked(c); reason == "" {
				p.idle[n-1] = nil
				p.idle = p.idle[:n-1]
				p.checkOutLocked(c)
				p.mu.Unlock()
				p.emit(ConnectionCheckedOut, c, start, "", nil)
				return c, nil
			}
		}
	}
	return p.checkOutSlow(ctx, start, ticket)
}

// checkOutSlow is CheckOut past the fast path; it is called with the lock
// held and releases it.
func (p *Pool) checkOutSlow(ctx context.Context, start time.Time, ticket uint64) (*Conn, error) {
	switch p.state {
	case statePoolClosed:
		p.mu.Unlock()
		return nil, p.checkOutFailed(start, &PoolClosedError{Address: p.address})
	case statePaused:
		err := &PoolClearedError{Address: p.address, Cause: p.clearCause}
		p.mu.Unlock()
		return nil, p.checkOutFailed(start, err)
	}
	var ob outbox
	if p.waiting == 0 {
		// Perished connections closed on the way may leave the pool below
		// minPoolSize: releaseLocked asks the maintenance to make up for them.
		if c := p.takeIdleLocked(&ob); c != nil {
			p.checkOutLocked(c)
			p.releaseLocked(&ob)
			p.emit(ConnectionCheckedOut, c, start, "", nil)
			return c, nil
		}
	}
	w := p.getWaiter()
	w.ticket, w.start = ticket, start
	p.queue.push(w)
	p.waiting++
	p.releaseLocked(&ob)
	return p.await(ctx, w, start)
}

// await waits for w's result or for the first time limit to end the wait.
func (p *Pool) await(ctx context.Context, w *waiter, start time.Time) (*Conn, error) {
	began := p.now()
	done := ctx.Done()
	if done == nil && p.cfg.waitQueueTimeout <= 0 && p.cfg.timeout <= 0 {
		// Nothing can end the wait but its result: a plain receive is
		// cheaper than the select below.
		<-w.ch
		return p.received(w, start, began)
	}
	// waitQueueTimeoutMS limits the wait in the queue only: a check-out whose
	// own connection is being established is past it. timeoutMS and the
	// context limit the whole check-out.
	var queueDeadline, totalDeadline time.Time
	if d := p.cfg.waitQueueTimeout; d > 0 {
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
			return p.received(w, start, began)
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
			return p.received(w, start, began)
		}
		if limit == errWaitQueueTimeout && p.queue.rank(w) < p.forWaiters {
			// Its connection is being established: the queue wait is over.
			p.mu.Unlock()
			queueDeadline = time.Time{}
			timer = armTimer(w, queueDeadline, totalDeadline)
			continue
		}
		w.state = waiterCanceled
		p.waiting--
		if p.waiting == 0 || p.queue.len() > 2*p.waiting+64 {
			p.queue.compact()
		}
		err := p.timeoutErrorLocked(limit, time.Since(began))
		p.mu.Unlock()
		stop()
		p.counts.waited(time.Since(began))
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
// ConnectionCheckedOut event is already out: the deliverer emitted it.
func (p *Pool) received(w *waiter, start, began time.Time) (*Conn, error) {
	c, err := w.conn, w.err
	p.putWaiter(w)
	p.counts.waited(time.Since(began))
	if err != nil {
		return nil, p.checkOutFailed(start, err)
	}
	return c, nil
}

// timeoutErrorLocked describes a check-out that gave up, with the state of the
// pool that held it up.
func (p *Pool) timeoutErrorLocked(limit error, waited time.Duration) *WaitQueueTimeoutError {
	e := p.timeoutError(limit, waited)
	e.InUse, e.Pending, e.Waiting = p.inUse, p.pending, p.waiting
	e.EstablishFailures, e.LastEstablishError = p.backoff.failures, p.backoff.last
	return e
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

// checkOutFailed emits ConnectionCheckOutFailed for err and returns it.
func (p *Pool) checkOutFailed(start time.Time, err error) error {
	reason := ReasonConnectionError
	switch err.(type) {
	case *PoolClosedError:
		reason = ReasonPoolClosed
	case *WaitQueueTimeoutError:
		reason = ReasonTimeout
		p.counts.timeouts.Add(1)
	}
	p.counts.checkOutFailed.Add(1)
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
	c, err := p.CheckOut(ctx)
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
