package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/internal/deliver"
)

// poolState is the specification's pool state.
type poolState uint8

const (
	statePaused poolState = iota
	stateReady
	statePoolClosed
)

func (s poolState) String() string {
	return [...]string{"paused", "ready", "closed"}[s]
}

// service is a generation counter: the pool's own in a non-load-balanced pool,
// one per serviceId in load-balanced mode, where count is the number of the
// pool's connections to that service.
type service struct {
	id    ServiceID
	gen   uint64
	count int
}

// Pool is a connection pool for one endpoint. It is safe for concurrent use.
type Pool struct {
	address string
	host    string // serverHost of the log messages
	port    int    // serverPort of the log messages; 0 for a Unix socket
	connect Connector
	cfg     config
	handled bool // there are event handlers, or the flight recorder
	// logDebug is the logger's last answer to whether it is enabled for
	// Debug: see observed.
	logDebug atomic.Bool
	timeAll  bool // every check-out reads the clock: see config.timesEveryCheckOut

	ctx       context.Context // parent of every establishment; ends with Close
	cancelAll context.CancelFunc
	poke      chan struct{} // asks the maintenance goroutine for a run now
	stop      chan struct{} // closed by Close
	wg        sync.WaitGroup
	waiters   sync.Pool     // of *waiter, recycled once delivered
	epoch     time.Time     // when the pool was created: see clock
	tickets   atomic.Uint64 // places in line when only the flight recorder listens: see queueStarted
	// testHookStarted, set by tests only, runs after an observed
	// check-out's CheckOutStarted event, before it takes the lock.
	testHookStarted func()

	mu         sync.Mutex // protects following fields
	state      poolState
	populate   bool    // maintenance may establish for minPoolSize: after PoolReady, if enabled
	main       service // the generation of a non-load-balanced pool
	services   map[ServiceID]*service
	clearCause error   // cause of the last clear, for the errors of a paused pool
	nextID     int64   // id of the last connection created
	conns      []*Conn // every pending, available and in-use connection
	idle       []*Conn // available connections, most recently checked in last
	queue      waitQueue
	waiting    int // live check-outs in queue
	forWaiters int // establishments under way on behalf of check-outs
	pending    int
	inUse      int
	// events are the events waiting for the delivery goroutine: the
	// handlers and the logger run there, never on a goroutine the pool's
	// work or a caller waits for.
	events  deliver.Queue[queuedEvent]
	backoff backoff       // of establishments after failures
	retry   *time.Timer   // ends the backoff, when something waits for it
	sampler useSampler    // picks the check-outs whose use is timed
	rec     recorder      // the flight recorder; its ring is set once, by New
	changed chan struct{} // closed at the next change Warm or Shutdown waits for: see changeLocked

	counts counters // running totals, read by Stats
}

// New returns a paused pool for the endpoint at address ("host:port", a host
// alone for port 27017, or a Unix socket path), establishing connections with
// connector. It emits the PoolCreated event and starts the pool's maintenance
// goroutine; call Ready to let it hand out connections and Close to stop it.
func New(address string, connector Connector, opts ...Option) (*Pool, error) {
	if address == "" {
		return nil, errors.New("mongopool: pool address is empty")
	}
	if connector == nil {
		return nil, errors.New("mongopool: pool for " + address + " needs a Connector")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		address: address,
		connect: connector,
		cfg:     cfg,
		handled: len(cfg.handlers) > 0 || cfg.flightRecorder > 0,
		timeAll: cfg.timesEveryCheckOut(),
		poke:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		epoch:   time.Now(),
	}
	p.events.Init(0, p.deliverEvent, p.eventsDropped)
	// Until a call asks the logger (see observed), the pool takes it to be
	// enabled: the delivery goroutine asks before it writes.
	p.logDebug.Store(cfg.logger != nil)
	if p.timeAll {
		p.sampler = newUseSampler(1)
	} else {
		p.sampler = newUseSampler(cfg.useSampling)
	}
	if cfg.flightRecorder > 0 {
		p.rec.ring = make([]record, cfg.flightRecorder)
	}
	p.host, p.port = splitAddress(address)
	p.ctx, p.cancelAll = context.WithCancel(context.Background())
	if cfg.loadBalanced {
		p.services = make(map[ServiceID]*service)
	}
	p.emitCreated()
	if cfg.maintenanceInterval > 0 || cfg.leakDetector {
		p.wg.Add(1)
		go p.maintain()
	}
	return p, nil
}

// Address returns the endpoint the pool connects to.
func (p *Pool) Address() string { return p.address }

// Ready marks a paused pool ready: check-outs are served and minPoolSize is
// established in the background. Readying a ready pool does nothing; readying
// a closed pool is an error.
func (p *Pool) Ready() error {
	p.mu.Lock()
	switch p.state {
	case statePoolClosed:
		p.mu.Unlock()
		return fmt.Errorf("mongopool: cannot ready the closed pool for %s: %w", p.address, ErrPoolClosed)
	case stateReady:
		p.mu.Unlock()
		return nil
	}
	p.state = stateReady
	// With the maintenance disabled nothing establishes for minPoolSize,
	// not even the end of an establishment (see establish). The
	// establishments the maintenance starts come after PoolReady, which is
	// queued before the lock is released.
	p.populate = p.cfg.maintenanceInterval > 0
	// The server was found fit again: the establishments start afresh.
	p.endBackoffLocked()
	var ob outbox
	ob.setPoolEvent(PoolReady, ServiceID{}, false, true)
	p.finishLocked(&ob)
	p.runMaintenanceSoon()
	return nil
}

// Close closes the pool: idle and pending connections are closed at once,
// checked-out ones when they are checked in, waiting and later check-outs fail
// with a [*PoolClosedError]. Close returns when every goroutine of the pool
// that does its work has ended (establishments are canceled). It does not
// wait for the event handlers: the events of the closing are delivered after
// it, in order, the PoolClosed event last (but for the ConnectionClosed events
// of connections still checked out or being handed over by their
// establishment), and the delivery goroutine ends after the last event. So
// an event handler may call Close. A Close while another one is under way
// returns when the first one would.
//
// A Connector or an establish-error handler must not call Close: Close waits
// for the goroutine they run on.
func (p *Pool) Close() error {
	p.markClosed()
	p.wg.Wait()
	return nil
}

// markClosed makes the pool closed, if it is not yet: the state change of
// Close.
func (p *Pool) markClosed() {
	p.observed()
	p.mu.Lock()
	if p.state == statePoolClosed {
		p.mu.Unlock()
		return
	}
	p.state = statePoolClosed
	p.populate = false
	var ob outbox
	for _, c := range p.idle {
		p.closeConnLocked(c, ReasonPoolClosed, nil, &ob)
	}
	p.idle = nil
	for _, c := range p.establishingLocked(nil, 0) {
		p.closeConnLocked(c, ReasonPoolClosed, nil, &ob)
	}
	closed := &PoolClosedError{Address: p.address}
	p.evictLocked(0, closed, &ob)
	p.stopRetryLocked()
	ob.setPoolEvent(PoolClosed, ServiceID{}, false, false)
	close(p.stop)
	p.cancelAll()
	p.changedLocked()
	// The delivery goroutine ends once it has delivered the events of the
	// closing (and any a later call brings).
	ob.wakeEvents = p.events.Close()
	p.finishLocked(&ob)
}

// spinTries is how many times lock tries the pool's lock again before it
// waits for it the way sync.Mutex does.
const spinTries = 50

// lock takes the pool's lock on the check-out and check-in paths. The pool
// holds it for a few dozen instructions there, so a goroutine that finds it
// taken is better off trying again a few times than being parked and woken
// by the runtime, which costs more than the wait itself (sync.Mutex spins
// only when no other goroutine is ready to run, which is never the case when
// many goroutines share the pool).
func (p *Pool) lock() {
	for range spinTries {
		if p.mu.TryLock() {
			return
		}
	}
	p.mu.Lock()
}

// establishingLocked returns the connections whose Connector is still at work
// (pending, no link yet), of service svc and generation <= gen when svc is not
// nil.
func (p *Pool) establishingLocked(svc *service, gen uint64) []*Conn {
	var out []*Conn
	for _, c := range p.conns {
		if c.state == statePending && c.link == nil && (svc == nil || c.svc == svc && c.gen <= gen) {
			out = append(out, c)
		}
	}
	return out
}

// newConnLocked creates a pending connection and prepares its establishment,
// which the outbox starts once the ConnectionCreated event is out.
func (p *Pool) newConnLocked(forWaiter bool, ob *outbox) {
	p.nextID++
	c := &Conn{pool: p, id: p.nextID, state: statePending, forWaiter: forWaiter, index: len(p.conns)}
	c.attempt.c = c
	if !p.cfg.loadBalanced {
		c.svc, c.gen = &p.main, p.main.gen
	}
	c.created = p.clock() // for the Establish histogram and the ConnectionReady event
	if life := p.cfg.maxLifetime; life > 0 {
		if j := p.cfg.lifetimeJitter; j > 0 {
			life -= rand.N(j)
		}
		c.expires = c.created + mono(life)
	}
	p.conns = append(p.conns, c)
	p.pending++
	if forWaiter {
		p.forWaiters++
	}
	p.counts.created.Add(1)
	var ctx context.Context
	if p.cfg.connectTimeout > 0 {
		ctx, c.cancel = context.WithTimeout(p.ctx, p.cfg.connectTimeout)
	} else {
		ctx, c.cancel = context.WithCancel(p.ctx)
	}
	ob.created = append(ob.created, establishment{c: c, ctx: ctx})
}

// canEstablishLocked reports whether maxConnecting, maxPoolSize and the
// backoff after failed establishments allow one more establishment. Callers
// ask only when they want one: when the backoff alone forbids it, the end of
// the backoff is arranged to ask again (see armRetryLocked).
func (p *Pool) canEstablishLocked() bool {
	if p.pending >= p.cfg.maxConnecting || p.cfg.maxPoolSize > 0 && len(p.conns) >= p.cfg.maxPoolSize {
		return false
	}
	if p.backingOffLocked() {
		p.armRetryLocked()
		return false
	}
	return true
}

// closeConnLocked marks c closed, takes it out of the counts and queues its
// ConnectionClosed event and the teardown of its link. Removing it from the
// idle list is the caller's business.
func (p *Pool) closeConnLocked(c *Conn, reason string, err error, ob *outbox) {
	switch c.state {
	case stateClosed:
		return
	case statePending:
		p.endPendingLocked(c)
		if c.cancel != nil {
			c.cancel()
		}
	case stateInUse:
		p.inUse--
		p.changedLocked()
	}
	c.state, c.closeReason, c.closeErr = stateClosed, reason, err

	last := p.conns[len(p.conns)-1]
	p.conns[c.index], last.index = last, c.index
	p.conns[len(p.conns)-1] = nil
	p.conns = p.conns[:len(p.conns)-1]

	if p.cfg.loadBalanced && c.svc != nil {
		if c.svc.count--; c.svc.count == 0 {
			delete(p.services, c.svc.id)
		}
	}
	p.counts.closed(reason)
	ob.closed = append(ob.closed, c)
	p.releaseLinkLocked(c, ob)
}

// endPendingLocked takes c, whose establishment is over, out of the pending
// counts, and reports whether it was being established for a check-out.
func (p *Pool) endPendingLocked(c *Conn) (forWaiter bool) {
	p.pending--
	p.changedLocked()
	if !c.forWaiter {
		return false
	}
	c.forWaiter = false
	p.forWaiters--
	return true
}

// releaseLinkLocked queues the teardown of c's link, once.
func (p *Pool) releaseLinkLocked(c *Conn, ob *outbox) {
	if c.link == nil || c.linkReleased {
		return
	}
	c.linkReleased = true
	ob.teardown = append(ob.teardown, c.link)
}

// perishedLocked returns why the available connection c must not be checked
// out ("" if it may be), reading the clock only when maxIdleTimeMS or a
// lifetime is set.
func (p *Pool) perishedLocked(c *Conn) (reason string, err error) {
	switch {
	case c.gen != c.svc.gen:
		return ReasonStale, nil
	case p.cfg.maxIdleTime > 0 && time.Since(c.idleSince) > p.cfg.maxIdleTime:
		return ReasonIdle, nil
	case c.expires != 0 && p.clock() >= c.expires:
		return ReasonLifetime, nil
	}
	if err := c.link.Err(); err != nil {
		return ReasonError, err
	}
	return "", nil
}

// takeIdleLocked pops the most recently used available connection that has
// not perished, closing the perished ones it finds on the way.
func (p *Pool) takeIdleLocked(ob *outbox) *Conn {
	for n := len(p.idle); n > 0; n = len(p.idle) {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if reason, err := p.perishedLocked(c); reason != "" {
			p.closeConnLocked(c, reason, err, ob)
			continue
		}
		return c
	}
	return nil
}

// dispatchLocked serves the wait queue with what the pool can give now: idle
// connections first, then new establishments while maxConnecting and
// maxPoolSize allow and there are more waiting check-outs than establishments
// under way. Those the maintenance started for minPoolSize count too: a
// connection established goes to the oldest waiter, so a check-out waits for
// one of them rather than start its own, as the specification's test
// "threads blocked by maxConnecting check out minPoolSize connections" asks.
func (p *Pool) dispatchLocked(ob *outbox) {
	for p.waiting > 0 && p.state == stateReady {
		if c := p.takeIdleLocked(ob); c != nil {
			p.deliverLocked(p.queue.popLive(), c, nil, ob, 0)
			continue
		}
		if p.waiting > p.pending && p.canEstablishLocked() {
			p.newConnLocked(true, ob)
			continue
		}
		return
	}
}

// deliverLocked gives w its result: a connection, checked out to it, or an
// error. The outbox signals w once the lock is released (waking a goroutine
// under the lock would lengthen every critical section by the scheduler's
// work), after the outbox's events and after the ConnectionCheckedOut of the
// connection: the deliverer emits that event rather than the waiter, so that
// these events come in the order the queue served the check-outs, not in the
// order the scheduler happens to run their goroutines.
//
// The check-out's wait ends here, at now, a reading of the clock the caller
// made (or 0, for a reading here): its sample is recorded with the count it
// goes with.
func (p *Pool) deliverLocked(w *waiter, c *Conn, err error, ob *outbox, now mono) {
	if now == 0 {
		now = p.clock()
	}
	p.waiting--
	w.state, w.conn, w.err, w.handed = waiterDelivered, c, err, now
	p.counts.checkOutWait.observe(time.Duration(now - w.start))
	if c != nil {
		p.checkOutLocked(c, now, &w.site)
	} else {
		p.counts.checkOutFailed++
	}
	ob.addWake(w)
}

// checkOutLocked counts c, taken from the idle list or just established, as
// checked out at, a reading of the clock, or 0 if the caller did not read
// it; site is the call site of the check-out, for the leak detector. It
// times the use of the check-outs the sampler picks (all of them when
// timeAll). CheckOut's fast path does the same in line.
func (p *Pool) checkOutLocked(c *Conn, at mono, site *[]uintptr) {
	p.countCheckOutLocked(c)
	if p.sampler.skip > 0 {
		p.sampler.skip--
		return
	}
	p.timeCheckOutLocked(c, at, site)
}

// countCheckOutLocked counts c as checked out.
func (p *Pool) countCheckOutLocked(c *Conn) {
	c.state = stateInUse
	p.inUse++
	p.counts.checkedOut++
}

// timeCheckOutLocked times the use of c, checked out at at (or now if at is
// 0), and keeps its call site for the leak detector. The sampler picked c
// (it picks every check-out when timeAll).
func (p *Pool) timeCheckOutLocked(c *Conn, at mono, site *[]uintptr) {
	p.sampler.skip = p.sampler.draw()
	if at == 0 {
		at = p.clock()
	}
	c.outAt = at
	if p.cfg.leakDetector {
		c.leakReported = false
		keepSite(&c.site, site)
	}
}

// checkOutFailedLocked counts a check-out that failed before it was queued,
// with its wait: measured from start if timed (it waited for the lock), 0 if
// it was decided at once.
func (p *Pool) checkOutFailedLocked(start mono, timed, timeout bool) {
	if timed {
		p.counts.checkOutWait.observe(time.Duration(p.clock() - start))
	} else {
		p.counts.immediate++
	}
	p.counts.checkOutFailed++
	if timeout {
		p.counts.timeouts++
	}
}

// releaseLocked ends a change made under the lock: it serves the wait queue
// with whatever the change made possible, releases the lock, carries out the
// outbox, and asks for a maintenance run if the pool is below minPoolSize
// and may establish now (if it may not, the end of an establishment under
// way will populate it).
func (p *Pool) releaseLocked(ob *outbox) {
	p.dispatchLocked(ob)
	poke := p.belowMinLocked() && p.canEstablishLocked()
	p.finishLocked(ob)
	if poke {
		p.runMaintenanceSoon()
	}
}

// evictLocked fails every live waiter after the first keep ones with err.
func (p *Pool) evictLocked(keep int, err error, ob *outbox) {
	rank := 0
	now := p.clock()
	p.queue.each(func(w *waiter) {
		if w.state != waiterWaiting {
			return
		}
		if rank++; rank > keep {
			p.deliverLocked(w, nil, err, ob, now)
		}
	})
	p.queue.compact()
}

// serviceLocked returns the generation entry of a load-balanced service,
// creating it at generation 0.
func (p *Pool) serviceLocked(id ServiceID) *service {
	s := p.services[id]
	if s == nil {
		s = &service{id: id}
		p.services[id] = s
	}
	return s
}

// runMaintenanceSoon asks the maintenance goroutine for a run now.
func (p *Pool) runMaintenanceSoon() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// belowMinLocked reports whether the maintenance has connections to
// establish for minPoolSize.
func (p *Pool) belowMinLocked() bool {
	return p.populate && len(p.conns) < p.cfg.minPoolSize
}

// changeLocked returns a channel closed at the next change that Warm or
// Shutdown waits for: the end of an establishment, the close of a
// connection that was checked out, a clear, the end of a backoff, Close.
// Nothing is made unless someone waits.
func (p *Pool) changeLocked() <-chan struct{} {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// changedLocked wakes those waiting for a change.
func (p *Pool) changedLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}
