package pool

import (
	"context"

	"github.com/mongopool/mongopool/internal/goid"
)

// An outbox collects, while the pool's lock is held, what must happen once it
// is released: events to emit, links to tear down, establishments to start and
// waiters to wake. finish does it in the order observers must see it: the
// events first (a state change's pool event, the ConnectionClosed and
// ConnectionCreated events), then the waiters (whose check-outs emit their own
// events), then the goroutines.
type outbox struct {
	events   []Event // built events queued behind a delivery under way: see Pool.emit
	closed   []*Conn
	created  []establishment
	wake1    *waiter   // the first waiter to wake: most outboxes have one at most
	wake     []*waiter // the others, in order
	teardown []Link

	pool      poolEvent     // of a state change; type 0 for none
	delivered chan struct{} // closed once the outbox is carried out (Close's)
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

// publishPool emits the pool event of a state change.
func (p *Pool) publishPool(pe poolEvent) {
	e := Event{Type: pe.t, Address: p.address, ServiceID: pe.svc, Interrupt: pe.interrupt}
	p.publish(&e)
}

// signal emits the ConnectionCheckedOut event of w's connection, if it was
// given one, and wakes w, which owns w from then on.
func (p *Pool) signal(w *waiter) {
	if w.conn != nil {
		p.deliver(ConnectionCheckedOut, w.conn, w.start, "", nil)
	}
	w.ch <- struct{}{}
}

// finish carries out the outbox. It runs no lock of the pool's held, and
// delivers the events itself: the caller decided, under the lock, that it is
// its turn to (see finishLocked).
func (ob *outbox) finish(p *Pool) {
	observed := p.observed()
	if observed {
		for i := range ob.events {
			p.publish(&ob.events[i])
		}
		if ob.pool.t != 0 && ob.pool.first {
			p.publishPool(ob.pool)
		}
		for _, c := range ob.closed {
			p.deliver(ConnectionClosed, c, 0, c.closeReason, c.closeErr)
		}
		if ob.pool.t != 0 && !ob.pool.first {
			p.publishPool(ob.pool)
		}
		for _, e := range ob.created {
			p.deliver(ConnectionCreated, e.c, 0, "", nil)
		}
	}
	if ob.wake1 != nil {
		p.signal(ob.wake1)
	}
	for _, w := range ob.wake {
		p.signal(w)
	}
	if len(ob.created) > 0 || len(ob.teardown) > 0 {
		p.startGoroutines(ob)
	}
	if ob.delivered != nil {
		close(ob.delivered)
	}
}

// finishLocked carries out ob once the lock is released; it is called with
// the lock held and releases it. Deliveries keep the order of the changes
// that made them:
//
//   - while the outboxes of state changes are being delivered (draining),
//     every outbox and every event goes behind them, into the backlog,
//     whoever makes it: a handler's own call to the pool included, so that
//     every handler sees the events in the order of the changes;
//   - otherwise a state change's outbox (Ready, Clear, Close: stateChange
//     true) starts a drain, which this goroutine runs to the end of the
//     backlog, and any other outbox is carried out at once by the goroutine
//     that made it.
//
// No goroutine ever waits for another's delivery: a call queued behind a
// drain returns at once, its events delivered by the draining goroutine.
func (p *Pool) finishLocked(ob *outbox, stateChange bool) {
	switch {
	case p.draining:
		if !ob.empty() {
			p.backlog = append(p.backlog, *ob)
		}
		p.mu.Unlock()
	case !stateChange:
		p.mu.Unlock()
		ob.finish(p)
	default:
		p.draining = true
		p.queued.Store(true)
		p.mu.Unlock()
		if p.observed() {
			// A handler of these events may call Close, which must then
			// not wait for the delivery it is part of.
			p.drainer.Store(goid.Current())
		}
		ob.finish(p)
		p.drain()
	}
}

// drain carries out the backlog, in order, then ends the drain.
func (p *Pool) drain() {
	for {
		p.mu.Lock()
		if len(p.backlog) == 0 {
			p.backlog = p.backlog[:0:0] // drop what a burst made it grow to
			p.draining = false
			p.queued.Store(false)
			p.drainer.Store(0)
			p.mu.Unlock()
			return
		}
		ob := p.backlog[0]
		p.backlog[0] = outbox{}
		p.backlog = p.backlog[1:]
		p.mu.Unlock()
		ob.finish(p)
	}
}

// empty reports whether there is nothing to carry out.
func (ob *outbox) empty() bool {
	return len(ob.events) == 0 && len(ob.closed) == 0 && len(ob.created) == 0 && ob.wake1 == nil &&
		len(ob.teardown) == 0 && ob.pool.t == 0 && ob.delivered == nil
}

// startGoroutines starts the establishments and the teardowns of ob, each on
// a goroutine of the pool's. A goroutine is counted for Close to wait for
// when it is started, not when the outbox was filled: a Close called
// meanwhile, from an event handler of this very outbox, must not wait for a
// goroutine that its own caller has yet to start. So the decision is made
// under the lock: once the pool is closed nothing starts (Close closed the
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
	p.wg.Add(n)
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
