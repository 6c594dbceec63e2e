package pool

import (
	"context"
	"encoding/hex"
	"time"
)

// A Connector establishes connections for a pool: dial, TLS, the hello
// handshake, compression negotiation and authentication. The real one lives
// outside this package; tests use fakes.
type Connector interface {
	// Connect establishes one connection and returns it ready for use. It runs
	// on a goroutine of the pool's, under a context that ends when the
	// establishment times out, when the pool is closed or when a clear with
	// interruptInUseConnections interrupts it; it must return promptly then.
	//
	// Connect calls a.HelloDone once the hello command has succeeded, passing
	// the serviceId of the reply in load-balanced mode. The pool uses that
	// call to tell an error of the handshake (which may come from an
	// overloaded server) from one of authentication (which does not), and to
	// assign the connection its service's generation.
	Connect(ctx context.Context, a *Attempt) (Link, error)
}

// ConnectorFunc adapts a function to the Connector interface.
type ConnectorFunc func(ctx context.Context, a *Attempt) (Link, error)

// Connect calls f.
func (f ConnectorFunc) Connect(ctx context.Context, a *Attempt) (Link, error) { return f(ctx, a) }

// A Link is an established connection as a Connector returns it: the pool owns
// it from then on.
type Link interface {
	// Close tears the link down. The pool calls it exactly once, never on the
	// path of a check-out or check-in. It may be called while another
	// goroutine is using the link, to interrupt it: the use must then fail.
	Close() error
	// Err returns nil while the link is fit for reuse, and the error that broke
	// it once it is not (a network error or timeout, a protocol error, the
	// server closing the connection). A link whose Err is not nil is closed
	// when it is checked in, with reason "error".
	Err() error
}

// ServiceID identifies the service behind a load balancer (the serviceId
// ObjectId of the hello reply).
type ServiceID [12]byte

// IsZero reports whether id is the zero value, which means "no service".
func (id ServiceID) IsZero() bool { return id == ServiceID{} }

// String returns the 24-digit hex form of id.
func (id ServiceID) String() string { return hex.EncodeToString(id[:]) }

// An Attempt is one establishment, as the pool shows it to its Connector.
type Attempt struct {
	c *Conn
}

// ConnectionID returns the pool's id of the connection being established.
func (a *Attempt) ConnectionID() int64 { return a.c.id }

// Address returns the endpoint's address.
func (a *Attempt) Address() string { return a.c.pool.address }

// HelloDone tells the pool that the hello command succeeded; serviceID is the
// reply's serviceId in load-balanced mode and the zero value otherwise. Errors
// returned by Connect after this call are authentication errors: they never
// get the backpressure labels.
func (a *Attempt) HelloDone(serviceID ServiceID) { a.c.pool.helloDone(a.c, serviceID) }

// connState is where a connection is in its life, as the specification names
// the states.
type connState uint8

const (
	statePending connState = iota
	stateAvailable
	stateInUse
	stateClosed
)

// Conn is a pooled connection. It is checked out by [Pool.CheckOut] or
// [Pool.Do] and must be checked in exactly once. Its methods may be called
// while it is checked out.
type Conn struct {
	pool    *Pool
	id      int64
	attempt Attempt
	link    Link // set once established

	// Guarded by pool.mu.
	state        connState
	gen          uint64   // generation of its service when it got one
	svc          *service // its generation entry; nil until the hello in load-balanced mode
	serviceID    ServiceID
	helloDone    bool
	forWaiter    bool      // being established for a check-out (vs. for minPoolSize)
	idleSince    time.Time // when it became available; set only when maxIdleTime > 0
	created      mono      // when it was created
	expires      mono      // when its lifetime ends (WithMaxLifetime); 0 for never
	index        int       // position in pool.conns
	cancel       context.CancelFunc
	closeReason  string
	closeErr     error
	interrupted  error     // the error its current user gets: set by an interrupting clear
	broken       error     // set when its user panicked: closed at check-in
	linkReleased bool      // its link's teardown is queued or done
	outAt        mono      // when it was checked out, if its use is timed; 0 otherwise
	site         []uintptr // the call site of its check-out, for the leak detector
	leakReported bool      // the leak detector reported its current check-out
}

// ID returns the connection's id: 1 for the pool's first connection, then in
// order of creation.
func (c *Conn) ID() int64 { return c.id }

// Link returns what the Connector established. Type-assert it to the
// Connector's own type to use it.
func (c *Conn) Link() Link { return c.link }

// Generation returns the generation of the pool (or of its service, in
// load-balanced mode) the connection belongs to.
func (c *Conn) Generation() uint64 {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return c.gen
}

// ServiceID returns the connection's serviceId in load-balanced mode, and the
// zero value otherwise.
func (c *Conn) ServiceID() ServiceID {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return c.serviceID
}

// Err returns nil unless a clear with interruptInUseConnections interrupted
// the connection while it was checked out; it then returns the retryable
// [*PoolClearedError] the operation using it should fail with. [Pool.Do]
// does this substitution itself.
func (c *Conn) Err() error {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return c.interrupted
}
