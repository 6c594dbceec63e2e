package pool

import (
	"context"
	"errors"
	"time"
)

// establish runs the Connector for c on a goroutine of the pool's, then hands
// the connection to the oldest waiting check-out or to the idle list. A
// check-out that gave up meanwhile wastes nothing: the connection stays in the
// pool.
func (p *Pool) establish(ctx context.Context, c *Conn) {
	defer p.wg.Done()
	link, err := p.connect.Connect(ctx, &c.attempt)
	ready := p.clock()
	p.observed()
	c.cancel() // releases the establishment's timer
	if err == nil && link == nil {
		err = errors.New("the connector returned neither a connection nor an error")
	}

	p.mu.Lock()
	if c.state == stateClosed {
		// A clear interrupted it or the pool closed: its event is out.
		p.discardLinkLocked(c, link)
		return
	}
	if err == nil && p.cfg.loadBalanced && c.svc == nil {
		err = errors.New("load-balanced mode: the connector reported no serviceId (the hello reply had none, or HelloDone was not called)")
		link.Close()
	}
	if err != nil {
		p.establishFailedLocked(c, err)
		return
	}
	// From here on the connection is this goroutine's to finish: clears and
	// Close leave a pending connection with a link alone.
	c.link = link
	var ob outbox
	ob.wakeEvents = p.emitLocked(ConnectionReady, c, c.created, "", nil)
	forWaiter := p.endPendingLocked(c)
	p.counts.establish.observe(time.Duration(ready - c.created))
	c.state = stateAvailable
	p.endBackoffLocked()
	switch stale := c.gen != c.svc.gen; {
	case p.state == statePoolClosed:
		p.closeConnLocked(c, ReasonPoolClosed, nil, &ob)
	case p.waiting > 0 && (!stale || forWaiter):
		// A stale connection still goes to the check-out it was established
		// for, which left the queue when its establishment began; it is
		// closed when checked in.
		p.deliverLocked(p.queue.popLive(), c, nil, &ob, 0)
	case stale:
		p.closeConnLocked(c, ReasonStale, nil, &ob)
	default:
		if p.cfg.maxIdleTime > 0 {
			c.idleSince = time.Now()
		}
		p.idle = append(p.idle, c)
	}
	// The establishment that ended makes room for the next one: waiters
	// first, then minPoolSize, started here rather than by a maintenance run
	// that would need its goroutine woken first.
	p.dispatchLocked(&ob)
	p.populateLocked(&ob)
	p.releaseLocked(&ob)
}

// establishFailedLocked handles a failed establishment: the error gets its
// labels, the establish-error handler hears of it, then the connection is
// closed and the check-out it was established for fails with the error.
// Called with the lock held; releases it.
func (p *Pool) establishFailedLocked(c *Conn, err error) {
	cerr := &ConnectionError{Address: p.address, ConnectionID: c.id, Generation: c.gen, DuringAuth: c.helloDone, Err: err}
	if !c.helloDone && mayBeOverload(err) {
		cerr.labels = []string{LabelSystemOverloaded, LabelRetryable}
	}
	p.counts.establishFailed.Add(1)
	p.establishFailedBackoffLocked(cerr)
	p.mu.Unlock()
	if h := p.cfg.establishFailed; h != nil {
		h(cerr)
	}

	p.mu.Lock()
	if c.state == stateClosed { // the handler cleared with interrupt, or closed the pool
		p.mu.Unlock()
		return
	}
	var ob outbox
	forWaiter := c.forWaiter
	p.closeConnLocked(c, ReasonError, cerr, &ob)
	if forWaiter && p.waiting > 0 {
		p.deliverLocked(p.queue.popLive(), nil, cerr, &ob, 0)
	}
	p.releaseLocked(&ob)
}

// discardLinkLocked tears down the link of a connection closed while it was
// being established. Called with the lock held; releases it.
func (p *Pool) discardLinkLocked(c *Conn, link Link) {
	var ob outbox
	if link != nil {
		c.link = link
		p.releaseLinkLocked(c, &ob)
	}
	p.finishLocked(&ob)
}

// helloDone records that c's hello succeeded and, in load-balanced mode,
// gives c the generation of its service.
func (p *Pool) helloDone(c *Conn, id ServiceID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.helloDone || c.state != statePending {
		return
	}
	c.helloDone = true
	if p.cfg.loadBalanced && !id.IsZero() {
		s := p.serviceLocked(id)
		s.count++
		c.svc, c.gen, c.serviceID = s, s.gen, id
	}
}
