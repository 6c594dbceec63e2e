package mongopool

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/pool"
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
// server: it applies the rule for errors during connection establishment
// (mark the server Unknown and clear its pool, or, in load-balanced mode, clear
// the service's connections) and, while the server is Unknown, monitors it
// until it answers, then marks the pool ready.
//
// Clears and readies happen under mu, so that they are ordered with the
// server's state as the specification asks ("clearing the pool MUST be
// synchronized with the update to the ServerDescription"), and so that none
// happens once close has begun: a clear racing with the pool's Close could
// otherwise wait on the very goroutine Close waits for.
type sdam struct {
	loadBalanced bool
	check        connection.Config // the monitor's: the hello without authentication
	heartbeat    time.Duration

	ctx    context.Context // ends on close: stops the monitor and its check
	cancel context.CancelFunc
	wake   chan struct{} // asks the monitor for a check now; buffered
	wg     sync.WaitGroup

	mu sync.Mutex
	p  *pool.Pool // set once the pool exists, before it can establish
	// closed is set by close: no clear or ready after it.
	closed bool
	// monitoring is true while the monitor goroutine runs, that is while
	// the server is Unknown.
	monitoring bool
	// staleUpTo is the highest id of the connections created before the
	// last clear: their errors are stale (the specification compares the
	// connection's generation with the pool's; connection ids grow with
	// generations, and the pool creates none while it is paused).
	staleUpTo int64
}

func newSDAM(cfg connection.Config, cs *connstring.ConnString) *sdam {
	check := cfg
	check.Auth = nil // monitoring connections do not authenticate
	ctx, cancel := context.WithCancel(context.Background())
	return &sdam{
		loadBalanced: cfg.Handshake.LoadBalanced,
		check:        check,
		heartbeat:    durationOr(cs.HeartbeatFrequency, defaultHeartbeatFrequency),
		ctx:          ctx,
		cancel:       cancel,
		wake:         make(chan struct{}, 1),
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

// establishFailed is the pool's establish-error handler: the specification's
// "MongoDB handshake errors" rule. It runs on the establishing goroutine, after
// the ConnectionCreated event and before the ConnectionClosed and
// ConnectionCheckOutFailed ones, which puts PoolCleared where the
// specification's event order wants it.
func (s *sdam) establishFailed(err error) {
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		// Backpressure: the server may be overloaded, not unknown, and
		// clearing would only add to its load.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.p == nil {
		return
	}
	if s.loadBalanced {
		// Errors up to the end of the hello are ignored; after it, only
		// the service's connections are cleared and nothing is paused.
		var se *serviceError
		if errors.As(err, &se) {
			s.p.Clear(pool.ClearOptions{Cause: err, ServiceID: se.service})
		}
		return
	}
	var ce *pool.ConnectionError
	if errors.As(err, &ce) && ce.ConnectionID <= s.staleUpTo {
		return // a connection of a generation already cleared
	}
	s.p.Clear(pool.ClearOptions{Cause: err})
	s.staleUpTo = s.p.Stats().Created
	if !s.monitoring {
		s.monitoring = true
		// A request left over from before the server became Unknown is
		// not one. It is dropped here rather than by the monitor, which
		// would drop a check-out's request made before it starts running.
		select {
		case <-s.wake:
		default:
		}
		s.wg.Add(1)
		go s.monitor()
	}
}

// requestCheck asks the monitor, if one runs, to check the server without
// waiting for the heartbeat.
func (s *sdam) requestCheck() {
	select {
	case s.wake <- struct{}{}:
	default: // a request is already pending
	}
}

// monitor checks the server until it answers, then marks the pool ready and
// ends. A check happens every heartbeat, or on request, but never within
// minHeartbeatFrequency of the previous one.
func (s *sdam) monitor() {
	defer s.wg.Done()
	heartbeat := time.NewTimer(s.heartbeat)
	defer heartbeat.Stop()
	var rest *time.Timer // the wait for minHeartbeatFrequency to pass
	defer func() {
		if rest != nil {
			rest.Stop()
		}
	}()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-heartbeat.C:
		case <-s.wake:
		}
		if rest != nil {
			select {
			case <-s.ctx.Done():
				return
			case <-rest.C:
			}
		}
		rest = time.NewTimer(minHeartbeatFrequency)
		heartbeat.Reset(s.heartbeat)
		if s.checkServer() != nil {
			continue // still Unknown
		}
		s.mu.Lock()
		if !s.closed {
			s.p.Ready()
		}
		s.monitoring = false
		s.mu.Unlock()
		return
	}
}

// checkServer establishes a monitoring connection (dial, TLS and the hello,
// without authentication, under connectTimeoutMS) and closes it.
func (s *sdam) checkServer() error {
	c, err := connection.Dial(s.ctx, &s.check, connection.Hooks{})
	if err != nil {
		return err
	}
	return c.Close()
}

// close stops the monitor and makes later establishment errors change
// nothing. It returns when no clear or ready of the pool is under way or can
// start.
func (s *sdam) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
