package pool

import "time"

// maintain is the pool's background goroutine. Each run does the work that is
// ready and ends; runs start every maintenance interval, and at once when the
// pool asks (after Ready, after Clear, when an establishment ends below
// minPoolSize). Close stops it.
func (p *Pool) maintain() {
	defer p.wg.Done()
	defer p.leaveWorker(p.enterWorker()) // it runs event handlers

	interval := p.cfg.maintenanceInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-p.poke:
		}
		p.maintenanceRun()
		t.Reset(interval)
	}
}

// maintenanceRun closes the idle connections that have perished (stale or idle
// too long) and starts establishments toward minPoolSize, as many as
// maxConnecting and maxPoolSize allow now, without waiting for any.
func (p *Pool) maintenanceRun() {
	p.mu.Lock()
	if p.state == statePoolClosed {
		p.mu.Unlock()
		return
	}
	var ob outbox
	kept := p.idle[:0]
	for _, c := range p.idle {
		if reason, err := p.perishedLocked(c); reason != "" {
			p.closeConnLocked(c, reason, err, &ob)
			continue
		}
		kept = append(kept, c)
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.dispatchLocked(&ob)
	p.populateLocked(&ob)
	p.finishLocked(&ob, false)
}

// populateLocked starts establishments toward minPoolSize, as many as
// maxConnecting and maxPoolSize allow now, without waiting for any.
func (p *Pool) populateLocked(ob *outbox) {
	for p.belowMinLocked() && p.state == stateReady && p.canEstablishLocked() {
		p.newConnLocked(false, ob)
	}
}
