package pool

import (
	"context"
	"fmt"
)

// WarmProgress is how far a [Pool.Warm] has got.
type WarmProgress struct {
	Target      int // the connections Warm establishes up to
	Established int // the pool's established connections now (idle or in use)
	Pending     int // the pool's establishments under way now
}

// Warm establishes connections until the pool has target of them (idle or in
// use), or minPoolSize of them if target is 0 or less, never more than
// maxPoolSize, as fast as maxConnecting allows, and returns once they are
// established. progress, if not nil, is called on the caller's goroutine
// each time the count changes, the last time with the final count.
//
// Warm returns early with ctx's error when ctx ends (the establishments under
// way go on, and their connections stay in the pool), with a
// [*PoolClearedError] or a [*PoolClosedError] when the pool is paused or
// closed, and with the error of the first establishment that fails while it
// waits (a [*ConnectionError]), or of the last one when the pool is backing
// off after failures. Establishments the maintenance makes for minPoolSize
// count too.
func (p *Pool) Warm(ctx context.Context, target int, progress func(WarmProgress)) error {
	last := WarmProgress{Established: -1}
	p.mu.Lock()
	failed := p.counts.establishFailed.Load()
	for {
		switch p.state {
		case statePoolClosed:
			p.mu.Unlock()
			return &PoolClosedError{Address: p.address}
		case statePaused:
			err := &PoolClearedError{Address: p.address, Cause: p.clearCause}
			p.mu.Unlock()
			return err
		}
		goal := target
		if goal <= 0 {
			goal = p.cfg.minPoolSize
		}
		if p.cfg.maxPoolSize > 0 {
			goal = min(goal, p.cfg.maxPoolSize)
		}
		var ob outbox
		for len(p.conns) < goal && p.canEstablishLocked() {
			p.newConnLocked(false, &ob)
		}
		now := WarmProgress{Target: goal, Established: len(p.conns) - p.pending, Pending: p.pending}
		var err error
		switch {
		case now.Established >= goal:
		case p.counts.establishFailed.Load() != failed:
			err = p.warmFailure(now, p.backoff.last)
		case p.pending == 0 && p.backingOffLocked():
			err = p.warmFailure(now, p.backoff.last)
		}
		done := now.Established >= goal || err != nil
		var change <-chan struct{}
		if !done {
			change = p.changeLocked()
		}
		p.releaseLocked(&ob)
		if progress != nil && now != last {
			progress(now)
		}
		last = now
		if done {
			return err
		}
		select {
		case <-change:
		case <-ctx.Done():
			return fmt.Errorf("mongopool: warming the pool for %s ended with %d of %d connections established: %w",
				p.address, now.Established, now.Target, ctx.Err())
		}
		p.mu.Lock()
	}
}

func (p *Pool) warmFailure(now WarmProgress, err error) error {
	return fmt.Errorf("mongopool: warming the pool for %s stopped with %d of %d connections established: %w",
		p.address, now.Established, now.Target, err)
}
