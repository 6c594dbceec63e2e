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
// returns, like Close, once the pool's goroutines have ended, and unlike
// Close once its events have been delivered to the handlers too, or ctx has
// ended.
//
// Called from an event handler, Shutdown waits until ctx ends, since the
// events it waits for come after the one being handled: call Close there.
// Like Close, it must not be called by a Connector or an establish-error
// handler.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.markClosed()
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
			if c.state == stateInUse {
				c.interrupted = &PoolClosedError{Address: p.address, Interrupted: true}
				p.releaseLinkLocked(c, &ob)
			}
		}
		p.finishLocked(&ob)
		p.mu.Lock()
		break
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.events.Wait(ctx) // the handlers' backlog is theirs: its end is not an error of the pool's
	return err
}
