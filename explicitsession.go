package mongopool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/topology"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// ErrSessionEnded is the error of a command run in a session after its
// EndSession.
var ErrSessionEnded = errors.New("mongopool: the session is ended")

// Session is an explicit session (the sessions specification's
// ClientSession): the commands run with WithSession(s) carry its lsid,
// which no other command uses until EndSession, and its retryable writes
// number their transactions in order. It takes a server session from the
// client's pool at its first command, and gives it back at EndSession. A
// Session is for one operation at a time.
type Session struct {
	c *Client

	mu    sync.Mutex // protects following fields
	ss    *serverSession
	dirty bool // a network error met it: the pool lets it go
	ended bool
	tx    sessionTxn // its transaction (transaction.go)
	// causal: the session is causally consistent; opTime is the
	// operationTime of its latest command (causal.go).
	causal    bool
	opTime    bson.Timestamp
	hasOpTime bool

	clusterTime atomic.Pointer[clusterTime] // its latest $clusterTime
}

// StartSession starts an explicit session, causally consistent unless
// WithCausalConsistency(false) says otherwise; end it with EndSession.
func (c *Client) StartSession(opts ...SessionOption) (*Session, error) {
	if c.closed.Load() {
		return nil, topology.ErrClosed
	}
	s := &Session{c: c, causal: true}
	for _, opt := range opts {
		opt(s)
	}
	return s, nil
}

// WithSession runs the command (or the cursor's commands) in the explicit
// session s, which must be the client's own.
func WithSession(s *Session) CommandOption {
	return func(o *operation) { o.explicit = s }
}

// ID returns the session's lsid document, {id: <UUID>}, taking its server
// session if no command has yet; nil once ended.
func (s *Session) ID() bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	return s.serverSessionLocked(s.c.sessionTimeout()).lsid
}

// EndSession ends the session, aborting its transaction if one is under
// way: its server session goes back to the client's pool (let go if a
// network error met it). A second EndSession does nothing.
func (s *Session) EndSession(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.endTransactionLocked(ctx)
	s.ended = true
	if s.ss != nil {
		s.c.endSession(&operation{session: s.ss, dirty: s.dirty})
		s.ss = nil
	}
}

// serverSessionLocked returns the session's server session, taken from the
// pool the first time.
func (s *Session) serverSessionLocked(timeout time.Duration) *serverSession {
	if s.ss == nil {
		s.ss = s.c.sessions.get(timeout, time.Now())
	}
	return s.ss
}

// take returns the server session of an operation in s.
func (s *Session) take(c *Client, timeout time.Duration) (*serverSession, error) {
	if s.c != c {
		return nil, errors.New("mongopool: WithSession: the session is another client's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil, ErrSessionEnded
	}
	return s.serverSessionLocked(timeout), nil
}

// note takes in the outcome of a command of the session's transaction.
func (s *Session) note(c *Client, o *operation, address string, reply bson.Raw, err error) {
	s.mu.Lock()
	s.noteLocked(c, o, address, reply, err)
	s.mu.Unlock()
}

// Dirty reports whether a network error met one of the session's commands:
// its server session, whose state on the server is then unknown, is let go
// at EndSession rather than given back to the pool (the sessions
// specification's dirty session).
func (s *Session) Dirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty
}

// markDirty notes that a network error met the session.
func (s *Session) markDirty() {
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
}

// sessionTimeout returns the deployment's session timeout, or MongoDB's
// default when it is not known yet.
func (c *Client) sessionTimeout() time.Duration {
	if m := c.topo.Description().LogicalSessionTimeoutMinutes; m != nil {
		return time.Duration(*m) * time.Minute
	}
	return defaultSessionTimeout
}
