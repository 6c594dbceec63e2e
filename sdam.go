package mongopool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/goid"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// Heartbeat intervals of the server monitoring specification.
const (
	// minHeartbeatFrequency is the least time between two checks of the
	// server, however often they are asked for.
	minHeartbeatFrequency = 500 * time.Millisecond
	// defaultHeartbeatFrequency is heartbeatFrequencyMS's default.
	defaultHeartbeatFrequency = 10 * time.Second
)

// sdam is what server discovery and monitoring does for a pool to a single
// server. It keeps the server's state, Unknown or not, and drives the pool
// with it by the specification's rules:
//
//   - a monitor checks the server every heartbeatFrequencyMS on a connection
//     of its own (see monitor.go): a failed check marks the server Unknown and
//     clears the pool (interrupting the connections in use after a timeout),
//     a successful one marks the pool ready;
//   - errors of connection establishment (the "MongoDB handshake errors")
//     and of operations (network errors, "not writable primary", "node is
//     recovering", "node is shutting down") mark it Unknown, and some clear
//     the pool (see establishFailed and operationFailed);
//   - in load-balanced mode nothing is monitored and nothing paused: errors
//     clear the connections of one service.
//
// Decisions are taken under mu, against the server's state, and carried out
// on the pool in the order they were taken (see post), so that a check that
// succeeded cannot mark the pool ready after an operation's network error
// cleared it. No lock of sdam's is held while the pool runs: the pool's
// event handlers may call the pool, and the Pool of this package, again.
type sdam struct {
	loadBalanced bool
	check        connection.Config // the monitor's: the hello without authentication
	heartbeat    time.Duration

	ctx     context.Context // ends on close: stops the monitor and its check
	cancel  context.CancelFunc
	wake    chan struct{} // asks the monitor for a check now; buffered
	wg      sync.WaitGroup
	monitor atomic.Uint64 // the monitor's goroutine id, for close

	mu sync.Mutex // protects following fields
	p  *pool.Pool // set once the pool exists, before it can establish
	// closed is set by close: no transition is carried out after it.
	closed bool
	// unknown is true while the server is Unknown.
	unknown bool
	// version is the topologyVersion of the last successful check.
	version *handshake.TopologyVersion
	// epoch counts the decisions that marked the server Unknown: a check
	// that began before one is stale and changes nothing (the
	// specification's "cancel the in-progress check").
	epoch uint64
	// staleBelow holds, by service (the zero one outside load-balanced
	// mode), the generation below which errors are stale because of clears
	// decided but maybe not carried out yet: with the pool's own
	// generation, it keeps two errors of one generation from clearing twice.
	staleBelow map[pool.ServiceID]uint64
	// cancelCheck interrupts the check in progress, if any.
	cancelCheck context.CancelFunc
	// applying is true while a goroutine carries out the transitions of
	// queue, in order.
	applying bool
	queue    []func(*pool.Pool)
}

func newSDAM(cfg connection.Config, cs *connstring.ConnString) *sdam {
	check := cfg
	check.Auth = nil // monitoring connections do not authenticate
	// The monitor's socket timeout is connectTimeoutMS, as the server
	// monitoring specification recommends.
	check.SocketTimeout = cfg.ConnectTimeout
	ctx, cancel := context.WithCancel(context.Background())
	return &sdam{
		loadBalanced: cfg.Handshake.LoadBalanced,
		check:        check,
		heartbeat:    durationOr(cs.HeartbeatFrequency, defaultHeartbeatFrequency),
		ctx:          ctx,
		cancel:       cancel,
		wake:         make(chan struct{}, 1),
		staleBelow:   make(map[pool.ServiceID]uint64),
	}
}

// start begins monitoring the server p serves, unless it is behind a load
// balancer (which the specification does not monitor).
func (s *sdam) start(p *pool.Pool) {
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	if !s.loadBalanced {
		s.wg.Add(1)
		go s.monitorLoop()
	}
}

// serviceError is an establishment error of a load-balanced connection that
// failed after its hello: it names the service whose connections SDAM error
// handling clears. It wraps the error unchanged otherwise.
type serviceError struct {
	service pool.ServiceID
	err     error
}

func (e *serviceError) Error() string { return e.err.Error() }
func (e *serviceError) Unwrap() error { return e.err }

var _ topology.ServiceError = (*serviceError)(nil)

// ServiceID returns the service whose connections the error clears (see
// topology.ServiceError).
func (e *serviceError) ServiceID() pool.ServiceID { return e.service }

// establishFailed is the pool's establish-error handler: the specification's
// rules for errors of connection establishment. It runs on the establishing
// goroutine, after the ConnectionCreated event and before the
// ConnectionClosed and ConnectionCheckOutFailed ones, which puts PoolCleared
// where the specification's event order wants it.
func (s *sdam) establishFailed(err error) {
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		// Backpressure: the server may be overloaded, not unknown, and
		// clearing would only add to its load. The pool backs off.
		return
	}
	if s.loadBalanced {
		// Errors up to the end of the hello are ignored; after it, only
		// the service's connections are cleared and nothing is paused.
		var se *serviceError
		if errors.As(err, &se) {
			s.clearService(se.service, err, 0, false)
		}
		return
	}
	var ce *pool.ConnectionError
	gen := uint64(0)
	if errors.As(err, &ce) {
		gen = ce.Generation
	}
	if sc, ok := stateChangeOf(err, nil); ok {
		s.stateChanged(sc, gen, err)
		return
	}
	// Any other error of the handshake or of authentication.
	s.markUnknown(gen, err, false)
}

// operationFailed applies the specification's rules for an error that an
// operation met on the checked-out connection c, whose link is conn.
func (s *sdam) operationFailed(c *pool.Conn, conn *connection.Conn, err error) {
	if c.Err() != nil {
		// A clear interrupted the connection: the pool's doing, not the
		// server's.
		return
	}
	if conn.Err() != nil {
		// The connection broke: a network error, or a reply that was not
		// one (a protocol error). A timeout, or the caller's context
		// ending, says nothing of the server.
		if isTimeout(err) || errors.Is(err, context.Canceled) {
			return
		}
		if s.loadBalanced {
			s.clearService(c.ServiceID(), err, c.Generation(), true)
			return
		}
		s.markUnknown(c.Generation(), err, false)
		return
	}
	if sc, ok := stateChangeOf(err, nil); ok {
		if s.loadBalanced {
			if sc.shutdown {
				s.clearService(c.ServiceID(), err, c.Generation(), true)
			}
			return
		}
		s.stateChanged(sc, c.Generation(), err)
	}
}

// replyReceived applies the rules to a successful reply that carries a
// writeConcernError: a state change there counts as one in an error.
func (s *sdam) replyReceived(c *pool.Conn, reply []byte) {
	if sc, ok := stateChangeOf(nil, reply); ok && !s.loadBalanced {
		s.stateChanged(sc, c.Generation(), fmt.Errorf("the reply's writeConcernError has code %d", sc.code))
	}
}

// markUnknown marks the server Unknown after err, from a connection of
// generation gen, and clears the pool, unless the error is stale: the pool
// was cleared since the connection was made.
func (s *sdam) markUnknown(gen uint64, err error, interrupt bool) {
	s.mu.Lock()
	if s.closed || s.p == nil || s.staleLocked(pool.ServiceID{}, gen) {
		s.mu.Unlock()
		return
	}
	s.unknownLocked()
	s.clearLocked(pool.ClearOptions{Cause: err, InterruptInUse: interrupt})
}

// stateChanged handles a "not writable primary" or "node is recovering"
// error: the server is marked Unknown, the pool cleared only if it is
// shutting down, and the monitor asked to check it now (it may well answer).
func (s *sdam) stateChanged(sc stateChange, gen uint64, err error) {
	s.mu.Lock()
	if s.closed || s.p == nil || s.staleLocked(pool.ServiceID{}, gen) || staleVersion(s.version, sc.version) {
		s.mu.Unlock()
		return
	}
	s.unknownLocked()
	if sc.version != nil {
		s.version = sc.version
	}
	if !sc.shutdown {
		s.mu.Unlock()
		s.requestCheck()
		return
	}
	s.clearLocked(pool.ClearOptions{Cause: err})
	s.requestCheck()
}

// unknownLocked marks the server Unknown and makes the check in progress, if
// any, stale and interrupted.
func (s *sdam) unknownLocked() {
	s.unknown = true
	s.epoch++
	if s.cancelCheck != nil {
		s.cancelCheck()
	}
}

// clearService clears the connections of a load-balanced service, unless
// the error is stale (the service was cleared since the connection was made:
// gen is checked when checkGen is set).
func (s *sdam) clearService(id pool.ServiceID, err error, gen uint64, checkGen bool) {
	s.mu.Lock()
	if s.closed || s.p == nil || id.IsZero() || checkGen && s.staleLocked(id, gen) {
		s.mu.Unlock()
		return
	}
	s.clearLocked(pool.ClearOptions{Cause: err, ServiceID: id})
}

// staleLocked reports whether an error from a connection of generation gen
// (of service id) is stale: a clear was decided since the connection was
// made.
func (s *sdam) staleLocked(id pool.ServiceID, gen uint64) bool {
	return gen < max(s.staleBelow[id], s.p.Generation(id))
}

// clearLocked decides a clear of the pool (of o.ServiceID's connections in
// load-balanced mode) and releases mu: the errors of the connections made
// before are stale from now on, even before the clear is carried out.
func (s *sdam) clearLocked(o pool.ClearOptions) {
	s.staleBelow[o.ServiceID] = max(s.staleBelow[o.ServiceID], s.p.Generation(o.ServiceID)) + 1
	s.postLocked(func(p *pool.Pool) { p.Clear(o) })
}

// postLocked queues a transition of the pool, decided under mu, and releases
// mu. Transitions are carried out in the order they were decided, by the
// goroutine that finds none being carried out; the others return at once, so
// that nobody waits for another goroutine's transition (its event handlers
// may be the ones calling here).
func (s *sdam) postLocked(t func(*pool.Pool)) {
	s.queue = append(s.queue, t)
	if s.applying {
		s.mu.Unlock()
		return
	}
	s.applying = true
	for len(s.queue) > 0 && !s.closed {
		t := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		p := s.p
		s.mu.Unlock()
		t(p)
		s.mu.Lock()
	}
	s.queue = nil
	s.applying = false
	s.mu.Unlock()
}

// requestCheck asks the monitor to check the server without waiting for the
// heartbeat.
func (s *sdam) requestCheck() {
	select {
	case s.wake <- struct{}{}:
	default: // a request is already pending
	}
}

// close stops the monitor and makes later errors change nothing. It returns
// once the monitor has ended, unless it is called on the monitor's own
// goroutine (from an event handler of the pool's Ready), which ends as soon
// as that handler returns.
func (s *sdam) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	if s.monitor.Load() != goid.Current() {
		s.wg.Wait()
	}
}
