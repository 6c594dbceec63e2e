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
	wake     []*waiter
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

// hasEvents reports whether the outbox holds events that a waiter's own
// events must follow.
func (ob *outbox) hasEvents() bool { return len(ob.closed) > 0 || len(ob.created) > 0 }

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
	for _, w := range ob.wake {
		w.ch <- struct{}{}
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
