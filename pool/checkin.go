package pool

import (
	"fmt"
	"time"
)

// CheckIn gives a checked-out connection back to the pool. The connection goes
// to the oldest waiting check-out if there is one, back to the idle list
// otherwise, or is closed if it has perished (stale after a clear, broken by an
// error its Link reported) or the pool is closed. Checking in a connection of
// another pool, or one that is not checked out, returns an error and changes
// nothing.
func (p *Pool) CheckIn(c *Conn) error {
	if c == nil || c.pool != p {
		return fmt.Errorf("%w: pool %s", ErrNotFromThisPool, p.address)
	}
	// The end of its use (and of the wait of the check-out it may go to):
	// read before the lock when every use is timed.
	var in mono
	if p.timeAll {
		in = p.clock()
	}
	observed := p.observed()
	p.lock()
	if c.state != stateInUse {
		p.mu.Unlock()
		return fmt.Errorf("%w: connection %d of pool %s", ErrNotCheckedOut, c.id, p.address)
	}
	// Queued under the lock: the event comes before anyone can check the
	// connection out again.
	wake := observed && p.emitLocked(ConnectionCheckedIn, c, 0, "", nil)
	p.counts.checkedIn++
	if c.outAt != 0 {
		if in == 0 {
			in = p.clock()
		}
		p.counts.use.observe(time.Duration(in - c.outAt))
		c.outAt = 0
	}

	if reason, err := p.checkInPerishedLocked(c); reason != "" {
		ob := outbox{wakeEvents: wake}
		p.closeConnLocked(c, reason, err, &ob)
		p.releaseLocked(&ob)
		return nil
	}

	if p.waiting > 0 {
		// Straight to the oldest waiter: it stays in use.
		p.inUse--
		ob := outbox{wakeEvents: wake}
		p.deliverLocked(p.queue.popLive(), c, nil, &ob, in)
		p.finishLocked(&ob)
		return nil
	}
	p.inUse--
	c.state = stateAvailable
	if p.cfg.maxIdleTime > 0 {
		c.idleSince = time.Now()
	}
	p.idle = append(p.idle, c)
	p.unlockAndWake(wake)
	return nil
}

// checkInPerishedLocked returns why a connection being checked in must be
// closed, or "".
func (p *Pool) checkInPerishedLocked(c *Conn) (reason string, err error) {
	// A broken connection is closed for its error even when a clear made it
	// stale too (often the clear its error caused): the error says more.
	switch {
	case p.state == statePoolClosed:
		return ReasonPoolClosed, nil
	case c.interrupted != nil: // its link was closed by the clear
		return ReasonStale, nil
	case c.broken != nil:
		return ReasonError, c.broken
	}
	if err := c.link.Err(); err != nil {
		return ReasonError, err
	}
	if c.gen != c.svc.gen { // a checked-out connection has its service
		return ReasonStale, nil
	}
	if c.expires != 0 && p.clock() >= c.expires {
		return ReasonLifetime, nil
	}
	if p.cfg.maxPoolSize > 0 && len(p.conns) > p.cfg.maxPoolSize {
		// Reconfigure lowered maxPoolSize: the pool shrinks as its
		// connections come back, even with check-outs waiting, which the
		// connections still in use will serve once it fits the limit.
		return ReasonShrunk, nil
	}
	return "", nil
}
