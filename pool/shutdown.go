package pool

import (
	"context"
	"fmt"
)

// Shutdown closes the pool as [Pool.Close] does (idle and pending connections
// at once, waiting and later check-outs fail), then waits for the
// connections still checked out to be checked in, until ctx ends. Those
// still out then have their links closed under their users, whose operations
// fail and whose [Conn.Err] is a [*PoolClosedError] with Interrupted set, and
// Shutdown returns an error wrapping ctx's that says how many there were. It
// returns, like Close, once the pool's goroutines have ended and its events
// have been delivered.
//
// Called from an event handler or another function the pool calls, Shutdown
// cannot wait: it closes the pool as Close does and returns.
func (p *Pool) Shutdown(ctx context.Context) error {
	inside := p.calledByPool()
	p.markClosed()
	if inside {
		return nil
	}
	var err error
	p.mu.Lock()
	for p.inUse > 0 {
		change := p.changeLocked()
		p.mu.Unlock()
		select {
		case <-change:
			p.mu.Lock()
			continue
		case <-ctx.Done():
		}
		p.mu.Lock()
		if p.inUse == 0 {
			break
		}
		err = fmt.Errorf("mongopool: shutting down the pool for %s: %d connections still checked out were interrupted: %w",
			p.address, p.inUse, ctx.Err())
		var ob outbox
		for _, c := range p.conns {
			if c.state == stateInUse || c.state == stateCheckingIn {
				c.interrupted = &PoolClosedError{Address: p.address, Interrupted: true}
				p.releaseLinkLocked(c, &ob)
			}
		}
		p.finishLocked(&ob, false)
		p.mu.Lock()
		break
	}
	p.mu.Unlock()
	p.wait()
	return err
}
