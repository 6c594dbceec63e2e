package pool

import "context"

// An outbox collects, while the pool's lock is held, what must happen once it
// is released: links to tear down, establishments to start and waiters to
// wake, and the events of these changes. finishLocked queues the events, in
// the order observers must see them, before it releases the lock: a state
// change's pool event, the ConnectionClosed and ConnectionCreated events, then
// the ConnectionCheckedOut events of the waiters served. Then it wakes the
// waiters and starts the goroutines.
type outbox struct {
	closed   []*Conn
	created  []establishment
	wake1    *waiter   // the first waiter to wake: most outboxes have one at most
	wake     []*waiter // the others, in order
	teardown []Link

	pool poolEvent // of a state change; type 0 for none
	// direct is a connection checked out at once by the slow path (not
	// through the queue), its check-out begun at directStart: its
	// ConnectionCheckedOut event comes after the closes of the idle
	// connections that had perished on its way.
	direct      *Conn
	directStart mono
	// wakeEvents is set when the delivery goroutine must be woken even if
	// the outbox queues no event (Close's).
	wakeEvents bool
}

// poolEvent is the pool event of a state change, emitted before the
// ConnectionClosed events (PoolCleared) or after them (PoolClosed). Only
// its fields are kept: the outbox is on the stack of every slow path.
type poolEvent struct {
	t         EventType
	svc       ServiceID
	interrupt bool
	first     bool
}

type establishment struct {
	c     *Conn
	ctx   context.Context
	start bool // decided by startGoroutines
}

// addWake queues w to be signalled, after the waiters queued before it.
func (ob *outbox) addWake(w *waiter) {
	if ob.wake1 == nil {
		ob.wake1 = w
		return
	}
	ob.wake = append(ob.wake, w)
}

// setPoolEvent makes ob emit the pool event of type t, before its
// ConnectionClosed events if first is true, after them otherwise.
func (ob *outbox) setPoolEvent(t EventType, svc ServiceID, interrupt, first bool) {
	ob.pool = poolEvent{t, svc, interrupt, first}
}

// finishLocked carries out ob: it queues ob's events (when someone listens)
// with the lock held, so that they come in the order of the changes, releases
// the lock, then wakes the waiters and starts the goroutines. It is called
// with the lock held and releases it.
func (p *Pool) finishLocked(ob *outbox) {
	wake := ob.wakeEvents
	if p.observedLocked() && p.queueOutboxLocked(ob) {
		wake = true
	}
	p.unlockAndWake(wake)
	if ob.wake1 != nil {
		ob.wake1.ch <- struct{}{}
	}
	for _, w := range ob.wake {
		w.ch <- struct{}{}
	}
	if len(ob.created) > 0 || len(ob.teardown) > 0 {
		p.startGoroutines(ob)
	}
}

// queueOutboxLocked queues ob's events and reports whether the delivery
// goroutine must be woken. The ConnectionCheckedOut (or
// ConnectionCheckOutFailed) event of a waiter is emitted here, by the
// goroutine that serves it, rather than by the waiter,
// so that these events come in the order the queue served the check-outs,
// not in the order the scheduler happens to run their goroutines.
func (p *Pool) queueOutboxLocked(ob *outbox) (wake bool) {
	queue := func(e Event) {
		if p.queueLocked(&e) {
			wake = true
		}
	}
	pe := ob.pool
	poolEvent := Event{Type: pe.t, Address: p.address, ServiceID: pe.svc, Interrupt: pe.interrupt}
	if pe.t != 0 && pe.first {
		queue(poolEvent)
	}
	for _, c := range ob.closed {
		queue(p.event(ConnectionClosed, c, 0, c.closeReason, c.closeErr))
	}
	if pe.t != 0 && !pe.first {
		queue(poolEvent)
	}
	for _, e := range ob.created {
		queue(p.event(ConnectionCreated, e.c, 0, "", nil))
	}
	if ob.direct != nil {
		queue(p.event(ConnectionCheckedOut, ob.direct, ob.directStart, "", nil))
	}
	served := func(w *waiter) {
		if w.conn != nil {
			queue(p.event(ConnectionCheckedOut, w.conn, w.start, "", nil))
		} else {
			queue(p.event(ConnectionCheckOutFailed, nil, w.start, checkOutFailedReason(w.err), w.err))
		}
	}
	if ob.wake1 != nil {
		served(ob.wake1)
	}
	for _, w := range ob.wake {
		served(w)
	}
	return wake
}

// startGoroutines starts the establishments and the teardowns of ob, each on
// a goroutine of the pool's. A goroutine is counted for Close to wait for
// when it is started, not when the outbox was filled: a Close that came in
// between has nothing to wait for but what it saw started. So the decision
// is made under the lock: once the pool is closed nothing starts (Close closed the
// pending connections already) and links are torn down here; an
// establishment that a clear interrupted meanwhile does not start either.
func (p *Pool) startGoroutines(ob *outbox) {
	p.mu.Lock()
	open := p.state != statePoolClosed
	n := 0
	for i := range ob.created {
		e := &ob.created[i]
		if e.start = open && e.c.state != stateClosed; e.start {
			n++
		}
	}
	if open {
		n += len(ob.teardown)
	}
	if n > 0 {
		// Never Add(0): after Close it would touch a WaitGroup whose Wait
		// may be returning (a synctest bubble takes that for a reuse).
		p.wg.Add(n)
	}
	p.mu.Unlock()
	for _, e := range ob.created {
		if e.start {
			go p.establish(e.ctx, e.c)
		}
	}
	for _, l := range ob.teardown {
		if open {
			go p.closeLink(l)
		} else {
			l.Close()
		}
	}
}

// closeLink tears a link down on a goroutine of the pool's.
func (p *Pool) closeLink(l Link) {
	defer p.wg.Done()
	l.Close()
}
