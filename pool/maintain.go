package pool

import "time"

// maintain is the pool's background goroutine. Each run does the work that is
// ready and ends; runs start every maintenance interval, and at once when the
// pool asks (after Ready, after Clear, when an establishment ends below
// minPoolSize). With the leak detector on, it also looks for leaks whenever
// the earliest check-out is due, even when the maintenance is off. Close
// stops it.
func (p *Pool) maintain() {
	defer p.wg.Done()

	var (
		interval = p.cfg.maintenanceInterval
		t        *time.Timer
		tick     <-chan time.Time
		poke     <-chan struct{}
	)
	if interval > 0 {
		t = time.NewTimer(interval)
		defer t.Stop()
		tick, poke = t.C, p.poke
	}
	var (
		leakTimer *time.Timer
		leakTick  <-chan time.Time
		leaks     []leakReport // reused from one look to the next
	)
	if p.cfg.leakDetector {
		leakTimer = time.NewTimer(p.cfg.leakThreshold)
		defer leakTimer.Stop()
		leakTick = leakTimer.C
	}
	for {
		select {
		case <-p.stop:
			return
		case <-tick:
		case <-poke:
		case <-leakTick:
			var next time.Duration
			leaks, next = p.findLeaks(leaks[:0])
			for i := range leaks {
				p.reportLeak(&leaks[i])
				leaks[i] = leakReport{} // lets its call site go
			}
			// Never sooner than a millisecond (or the threshold) from
			// now: a report a little late is better than a timer that
			// fires without end if the clock misbehaves.
			leakTimer.Reset(max(next, min(p.cfg.leakThreshold, time.Millisecond)))
			continue
		}
		p.maintenanceRun()
		t.Reset(interval)
	}
}

// maintenanceRun closes the idle connections that have perished (stale, idle
// too long, past their lifetime) and those above maxPoolSize, and starts establishments toward minPoolSize, as many as
// maxConnecting and maxPoolSize allow now, without waiting for any.
func (p *Pool) maintenanceRun() {
	p.observed()
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
	p.shrinkLocked(&ob) // connections established after Reconfigure lowered maxPoolSize
	p.dispatchLocked(&ob)
	p.populateLocked(&ob)
	p.finishLocked(&ob)
}

// populateLocked starts establishments toward minPoolSize, as many as
// maxConnecting and maxPoolSize allow now, without waiting for any.
func (p *Pool) populateLocked(ob *outbox) {
	for p.belowMinLocked() && p.state == stateReady && p.canEstablishLocked() {
		p.newConnLocked(false, ob)
	}
}
