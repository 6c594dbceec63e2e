package pool

import (
	"fmt"
	"slices"
	"time"
)

// Reconfigure changes the limits of a running pool: the options
// [WithMaxPoolSize], [WithMinPoolSize], [WithMaxConnecting],
// [WithMaxIdleTime] and [WithWaitQueueTimeout], which it takes like [New]
// does. Options left out keep their current values; the others are refused
// with an [*OptionError] naming them, and so is a set of limits New would
// refuse (a minPoolSize above the maxPoolSize, say): nothing changes then.
//
// The new limits apply at once:
//   - a larger maxPoolSize or maxConnecting serves the check-outs waiting
//     now, as far as it allows;
//   - a smaller maxPoolSize closes idle connections (the least recently used
//     first) until the pool fits, then connections as they are checked in,
//     until it fits: never a connection in use. Those connections are
//     closed with reason [ReasonShrunk];
//   - a larger minPoolSize has the maintenance establish the missing
//     connections;
//   - maxIdleTimeMS counts from the change for connections idle when it was
//     off;
//   - waitQueueTimeoutMS applies to the check-outs that start waiting after
//     the change.
//
// A [PoolReconfigured] event and log message report every limit as it is
// now; [Pool.Stats] shows them too.
func (p *Pool) Reconfigure(opts ...Option) error {
	p.observed()
	p.mu.Lock()
	if p.state == statePoolClosed {
		p.mu.Unlock()
		return fmt.Errorf("mongopool: cannot reconfigure the closed pool for %s: %w", p.address, ErrPoolClosed)
	}
	cfg := p.cfg
	cfg.fixed = ""
	cfg.handlers = slices.Clip(cfg.handlers) // an option's append must not write into the pool's array
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.fixed != "" {
		p.mu.Unlock()
		return &OptionError{cfg.fixed, nil, "cannot be changed on a running pool: Reconfigure changes maxPoolSize, minPoolSize, maxConnecting, maxIdleTimeMS and waitQueueTimeoutMS"}
	}
	if err := cfg.validate(); err != nil {
		p.mu.Unlock()
		return err
	}
	if p.cfg.maxIdleTime == 0 && cfg.maxIdleTime > 0 {
		// Their idle time was not kept while there was no limit.
		now := time.Now()
		for _, c := range p.idle {
			c.idleSince = now
		}
	}
	// Field by field: the fields Reconfigure does not change are read
	// without the lock.
	p.cfg.maxPoolSize, p.cfg.minPoolSize, p.cfg.maxConnecting = cfg.maxPoolSize, cfg.minPoolSize, cfg.maxConnecting
	p.cfg.maxIdleTime, p.cfg.waitQueueTimeout, p.cfg.set = cfg.maxIdleTime, cfg.waitQueueTimeout, cfg.set

	var ob outbox
	if p.observedLocked() {
		// Before the closes it makes: queued now.
		e := Event{Type: PoolReconfigured, Address: p.address, Options: p.cfg.currentOptions()}
		ob.wakeEvents = p.queueLocked(&e)
	}
	p.shrinkLocked(&ob)
	p.releaseLocked(&ob) // serves the waiters, and has the maintenance populate
	return nil
}

// shrinkLocked closes idle connections, the least recently used first, while
// the pool has more connections than maxPoolSize.
func (p *Pool) shrinkLocked(ob *outbox) {
	if p.cfg.maxPoolSize == 0 {
		return
	}
	n := min(len(p.conns)-p.cfg.maxPoolSize, len(p.idle))
	if n <= 0 {
		return
	}
	for _, c := range p.idle[:n] {
		p.closeConnLocked(c, ReasonShrunk, nil, ob)
	}
	p.idle = slices.Delete(p.idle, 0, n)
}

// currentOptions lists every specification option with its value now, for
// the PoolReconfigured event and log message.
func (c *config) currentOptions() map[string]int64 {
	return map[string]int64{
		"maxIdleTimeMS":      ceilMS(c.maxIdleTime),
		"minPoolSize":        int64(c.minPoolSize),
		"maxPoolSize":        int64(c.maxPoolSize),
		"maxConnecting":      int64(c.maxConnecting),
		"waitQueueTimeoutMS": ceilMS(c.waitQueueTimeout),
	}
}
