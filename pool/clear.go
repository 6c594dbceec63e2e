package pool

import (
	"errors"
	"fmt"
)

// ClearOptions says what a [Pool.Clear] clears and why.
type ClearOptions struct {
	// Cause is the error that made the caller clear the pool. Check-outs that
	// fail because of the clear return a [*PoolClearedError] carrying it.
	Cause error
	// InterruptInUse (the specification's interruptInUseConnections) also
	// interrupts the connections of the cleared generation that are checked
	// out or still being established: their links are closed now, and the
	// operations using them fail with a retryable [*PoolClearedError].
	InterruptInUse bool
	// ServiceID selects the service to clear in load-balanced mode, where it
	// is required; it must be zero otherwise.
	ServiceID ServiceID
	// KeepReady recycles rather than clears for a failure: the connections
	// of the current generation become stale all the same, but the pool
	// is not paused, and the check-outs waiting or to come go on, with
	// new connections. It is an administrator's reconnect (new
	// credentials, a server moved behind its name), beyond the
	// specification, whose clears are for a server that failed.
	KeepReady bool
}

// Clear makes every connection of the current generation stale: idle ones are
// closed when the maintenance or a check-out meets them, checked-out ones when
// they are checked in.
//
// A non-load-balanced pool is also paused: check-outs waiting in the queue fail
// at once with a retryable [*PoolClearedError], and so do new ones until Ready.
// Check-outs whose own connection is being established are not in the queue
// any more and get that connection. Clearing a paused pool emits no event.
//
// In load-balanced mode Clear affects only the connections to o.ServiceID and
// neither pauses the pool nor touches the queue.
func (p *Pool) Clear(o ClearOptions) error {
	switch {
	case p.cfg.loadBalanced && o.ServiceID.IsZero():
		return errors.New("mongopool: Clear of the load-balanced pool for " + p.address + " needs a ServiceID")
	case !p.cfg.loadBalanced && !o.ServiceID.IsZero():
		return fmt.Errorf("mongopool: Clear with ServiceID %s, but the pool for %s is not load-balanced", o.ServiceID, p.address)
	}
	p.mu.Lock()
	if p.state == statePoolClosed {
		p.mu.Unlock()
		return nil
	}
	var ob outbox
	svc := &p.main
	if p.cfg.loadBalanced {
		svc = p.services[o.ServiceID] // nil: no connection to clear
	}
	announce := true
	if svc != nil {
		cleared := svc.gen
		svc.gen++
		if o.InterruptInUse {
			p.interruptLocked(svc, cleared, o.Cause, &ob)
		}
	}
	if !p.cfg.loadBalanced && !o.KeepReady {
		announce = p.state != statePaused
		p.state, p.populate, p.clearCause = statePaused, false, o.Cause
		p.evictLocked(p.forWaiters, &PoolClearedError{Address: p.address, Cause: o.Cause}, &ob)
	}
	p.dispatchLocked(&ob) // an interrupt may have made room (load-balanced mode)
	p.counts.clears.Add(1)
	p.changedLocked()
	if announce {
		ob.setPoolEvent(PoolCleared, o.ServiceID, o.InterruptInUse, true)
	}
	p.finishLocked(&ob)
	p.runMaintenanceSoon() // to close the stale idle connections now
	return nil
}

// Generation returns the pool's current generation or, in load-balanced mode,
// that of the service id (0 for a service the pool has no connection to). A
// topology layer compares it with the generation of a connection, or of a
// [*ConnectionError], to tell a stale error from a current one.
func (p *Pool) Generation(id ServiceID) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cfg.loadBalanced {
		return p.main.gen
	}
	if s := p.services[id]; s != nil {
		return s.gen
	}
	return 0
}

// interruptLocked interrupts the connections of svc of generation <= gen that
// are checked out (their links are closed under their users) or still being
// established (their establishment is canceled and they are closed).
func (p *Pool) interruptLocked(svc *service, gen uint64, cause error, ob *outbox) {
	for _, c := range p.establishingLocked(svc, gen) {
		p.closeConnLocked(c, ReasonStale, nil, ob)
	}
	for _, c := range p.conns {
		if c.state == stateInUse && c.svc == svc && c.gen <= gen {
			c.interrupted = &PoolClearedError{Address: p.address, Cause: cause, Interrupted: true}
			p.releaseLinkLocked(c, ob)
		}
	}
}
