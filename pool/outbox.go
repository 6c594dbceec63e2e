package pool

import "context"

// An outbox collects, while the pool's lock is held, what must happen once it
// is released: events to emit, links to tear down, establishments to start and
// waiters to wake. finish does it in the order observers must see it: the
// ConnectionClosed and ConnectionCreated events first, then the waiters (whose
// check-outs emit their own events), then the goroutines.
type outbox struct {
	closed   []*Conn
	created  []establishment
	wake1    *waiter   // the first waiter to wake: most outboxes have one at most
	wake     []*waiter // the others, in order
	teardown []teardown
	emitted  bool // emitClosed already ran
}

type establishment struct {
	c   *Conn
	ctx context.Context
}

type teardown struct {
	link  Link
	async bool // on a goroutine counted in pool.wg (already added)
}

// addWake queues w to be signalled, after the waiters queued before it.
func (ob *outbox) addWake(w *waiter) {
	if ob.wake1 == nil {
		ob.wake1 = w
		return
	}
	ob.wake = append(ob.wake, w)
}

// signal emits the ConnectionCheckedOut event of w's connection, if it was
// given one, and wakes w, which owns w from then on.
func (p *Pool) signal(w *waiter) {
	if w.conn != nil {
		p.emit(ConnectionCheckedOut, w.conn, w.start, "", nil)
	}
	w.ch <- struct{}{}
}

// emitClosed emits the ConnectionClosed events; Close calls it before it emits
// PoolClosed, and finish calls it otherwise.
func (ob *outbox) emitClosed(p *Pool) {
	if ob.emitted {
		return
	}
	ob.emitted = true
	for _, c := range ob.closed {
		p.emit(ConnectionClosed, c, zeroTime, c.closeReason, c.closeErr)
	}
}

// finish carries out the rest of the outbox.
func (ob *outbox) finish(p *Pool) {
	ob.emitClosed(p)
	for _, e := range ob.created {
		p.emit(ConnectionCreated, e.c, zeroTime, "", nil)
	}
	if ob.wake1 != nil {
		p.signal(ob.wake1)
	}
	for _, w := range ob.wake {
		p.signal(w)
	}
	for _, e := range ob.created {
		go p.establish(e.ctx, e.c)
	}
	for _, t := range ob.teardown {
		if t.async {
			go p.closeLink(t.link)
		} else {
			t.link.Close()
		}
	}
}

// closeLink tears a link down on a goroutine of the pool's.
func (p *Pool) closeLink(l Link) {
	defer p.wg.Done()
	l.Close()
}
