package mongotest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Server is a running in-process MongoDB server. Its methods are safe for
// concurrent use.
type Server struct {
	cfg  config
	ln   net.Listener
	addr string

	users    users    // the credentials AddUser and AddX509User register
	store    store    // databases, collections and documents
	cursors  cursors  // open cursors
	sessions sessions // the retryable writes of each session
	stats    stats

	role       role          // standalone, replica set member or mongos
	electionID bson.ObjectID // the replica set's, in hello
	started    time.Time
	active     atomic.Int64 // the commands running, for serverStatus

	nextConnID atomic.Int32

	faults faultSet      // injected faults (InjectFault)
	accept acceptGate    // PauseAccepting, ResumeAccepting
	done   chan struct{} // closed by Close, to end waits that faults start

	failPoints failPoints // the failCommand fail point (SetFailPoint)

	mu     sync.Mutex
	conns  map[*conn]struct{} // the connections being served
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection goroutine
}

// Start starts a server listening on 127.0.0.1 on a free TCP port, and
// serves every connection on its own goroutine until Close.
func Start(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.loadBalanced && cfg.replicaSet != "" {
		return nil, fmt.Errorf("mongotest: WithLoadBalanced and WithReplicaSet: a server is a mongos or a replica set member, not both")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mongotest: listening: %w", err)
	}
	s := &Server{cfg: cfg, addr: ln.Addr().String(), conns: make(map[*conn]struct{}), done: make(chan struct{}),
		started: time.Now(), electionID: bson.NewObjectID()}
	switch {
	case cfg.loadBalanced:
		s.role = roleMongos
	case cfg.replicaSet != "":
		s.role = roleReplicaSet
	}
	s.store.init()
	s.cursors.init()
	s.stats.init()
	if cfg.tls != nil {
		ln = tls.NewListener(ln, cfg.tls)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr returns the address the server listens on, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for the server,
// "mongodb://127.0.0.1:port/". Add options as needed, such as tls=true and
// tlsCAFile for a TLS server or loadBalanced=true for a load-balanced one.
func (s *Server) URI() string { return "mongodb://" + s.addr + "/" }

// ServiceID returns the serviceId the handshake reports in load-balanced
// mode, and the zero ObjectID otherwise.
func (s *Server) ServiceID() bson.ObjectID { return s.cfg.serviceID }

// Close stops the server: it closes the listener and every connection, and
// returns once every goroutine the server started has ended. Stats still
// works afterwards; nothing else does. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// acceptLoop accepts connections until the listener is closed.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		if !s.waitAccepting() {
			return
		}
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(5 * time.Millisecond) // a failed accept (such as EMFILE) is not fatal
			continue
		}
		// PauseAccepting may have come while Accept was blocked: hold the
		// connection unserved, as if it were still in the backlog.
		if !s.waitAccepting() {
			nc.Close()
			return
		}
		_, silent := s.faults.take(true, "")
		c := &conn{srv: s, nc: nc, id: s.nextConnID.Add(1)}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.stats.connOpened()
		go func() {
			defer s.wg.Done()
			if silent {
				c.silence()
			} else {
				c.serve()
			}
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.stats.connClosed()
		}()
	}
}
