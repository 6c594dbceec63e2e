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
	addr string
	// advertised is the address the server gives as its own (see
	// WithAdvertisedHosts); addr unless told otherwise.
	advertised string

	// The members of a replica set share users, store and sessions, as the
	// replication of the data would make them; each member has its own
	// cursors, fail points, faults and stats, as each mongod has.
	users    *users    // the credentials AddUser and AddX509User register
	store    *store    // databases, collections and documents
	sessions *sessions // the retryable writes of each session
	cursors  cursors   // open cursors
	stats    stats

	role role // standalone, replica set member or mongos
	// rs is the replica set of a member (roleReplicaSet), and self its
	// index there; nil otherwise.
	rs   *ReplicaSet
	self int
	// router routes the commands of a mongos of a ShardedCluster; nil
	// otherwise.
	router  *router
	started time.Time
	// processID is a standalone's topologyVersion.processId, new at each
	// Start (a replica set member's is its member's).
	processID bson.ObjectID
	active    atomic.Int64 // the commands running, for serverStatus
	ops       activeOps    // the commands running, for currentOp and killOp

	nextConnID atomic.Int32

	faults faultSet   // injected faults (InjectFault)
	accept acceptGate // PauseAccepting, ResumeAccepting
	// admission is the connection rate limit (LimitConnectionRate).
	admission admission
	// done is closed by Close, to end the waits of callers of the API
	// (WaitForFailPoint); the waits of connections end with their life.
	done chan struct{}

	failPoints failPoints // the failCommand fail point (SetFailPoint)

	mu sync.Mutex
	// life is what the server runs now: its listener and connections; nil
	// while a replica set member is stopped (ReplicaSet.Stop).
	life   *life
	closed bool
	wg     sync.WaitGroup // the accept loops and every connection goroutine
}

// life is one run of a server, from Start or ReplicaSet.Restart to Close or
// ReplicaSet.Stop, as a mongod process lives from its start to its end.
type life struct {
	ln    net.Listener
	conns map[*conn]struct{} // the connections being served
	// done is closed when the run ends, which ends every wait of its
	// connections (fail points, faults, awaitable hellos, partitions).
	done chan struct{}
}

// Start starts a server listening on 127.0.0.1 on a free TCP port (or on
// a Network, see WithNetwork), and serves every connection on its own
// goroutine until Close.
func Start(opts ...Option) (*Server, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.replicaSet != "" {
		rs, err := startReplicaSet(cfg.replicaSet, 1, cfg)
		if err != nil {
			return nil, err
		}
		return rs.members[0].srv, nil
	}
	if len(cfg.members) > 0 {
		return nil, errors.New("mongotest: WithMember configures a member of a replica set: use it with StartReplicaSet or WithReplicaSet")
	}
	if cfg.advertised != nil {
		return nil, errors.New("mongotest: WithAdvertisedHosts names the members of a replica set: use it with StartReplicaSet or WithReplicaSet")
	}
	ln, err := cfg.listen(cfg.listenAddr(0))
	if err != nil {
		return nil, err
	}
	s := newServer(cfg, ln.Addr().String(), &shared{})
	if cfg.mongos {
		s.role = roleMongos
	}
	if err := s.serve(ln); err != nil {
		return nil, err
	}
	if cfg.network != nil {
		cfg.network.track(s)
	}
	return s, nil
}

// newConfig applies opts to the default configuration.
func newConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	switch {
	case cfg.loadBalanced && cfg.replicaSet != "":
		return cfg, fmt.Errorf("mongotest: WithLoadBalanced and WithReplicaSet: a server is a mongos or a replica set member, not both")
	case cfg.mongos && cfg.replicaSet != "":
		return cfg, fmt.Errorf("mongotest: WithMongos and WithReplicaSet: a server is a mongos or a replica set member, not both")
	}
	return cfg, nil
}

// shared is the state the members of a replica set share.
type shared struct {
	users    *users
	store    *store
	sessions *sessions
}

// newServer returns a server of cfg at addr, not yet running, with the
// shared state sh (whose nil parts it creates).
func newServer(cfg config, addr string, sh *shared) *Server {
	if sh.users == nil {
		sh.users = &users{}
	}
	if sh.store == nil {
		sh.store = &store{}
		sh.store.init()
	}
	if sh.sessions == nil {
		sh.sessions = &sessions{}
	}
	s := &Server{cfg: cfg, addr: addr, advertised: addr, users: sh.users, store: sh.store, sessions: sh.sessions,
		done: make(chan struct{}), started: time.Now(), processID: bson.NewObjectID()}
	s.cursors.init()
	s.stats.init()
	return s
}

// listen listens on addr: on the Network of WithNetwork, or else on TCP.
func (c *config) listen(addr string) (net.Listener, error) {
	var ln net.Listener
	var err error
	if c.network != nil {
		ln, err = c.network.Listen(addr)
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("mongotest: listening on %s: %w", addr, err)
	}
	return ln, nil
}

// serve starts a life of the server on ln: it accepts and serves connections
// until stop. It fails, closing ln, if the server is closed.
func (s *Server) serve(ln net.Listener) error {
	if s.cfg.tls != nil {
		ln = tls.NewListener(ln, s.cfg.tls)
	}
	l := &life{ln: ln, conns: make(map[*conn]struct{}), done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return errors.New("mongotest: the server is closed")
	}
	s.life = l
	s.wg.Add(1)
	go s.acceptLoop(l)
	return nil
}

// Addr returns the address the server listens on, "127.0.0.1:port" (on
// its Network, with WithNetwork).
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for the server,
// "mongodb://127.0.0.1:port/". Add options as needed, such as tls=true and
// tlsCAFile for a TLS server or loadBalanced=true for a load-balanced one.
// For a replica set, ReplicaSet.URI lists every member.
func (s *Server) URI() string { return "mongodb://" + s.addr + "/" }

// ServiceID returns the serviceId the handshake reports in load-balanced
// mode, and the zero ObjectID otherwise.
func (s *Server) ServiceID() bson.ObjectID { return s.cfg.serviceID }

// Close stops the server: it closes the listener and every connection, and
// returns once every goroutine the server started has ended. Stats still
// works afterwards; nothing else does. Close is idempotent. Closing a
// member of a replica set stops it for good, as ReplicaSet.Stop does
// until ReplicaSet.Restart.
func (s *Server) Close() error {
	err := s.stop(true)
	if s.rs != nil {
		s.rs.memberDown(s.self)
	}
	return err
}

// stop ends the server's life, if it has one: it closes the listener and
// every connection, and waits for their goroutines. final (Close) also
// ends the waits of the API's callers, and the server's use.
func (s *Server) stop(final bool) error {
	s.mu.Lock()
	if final && !s.closed {
		s.closed = true
		close(s.done)
	}
	l := s.life
	s.life = nil
	var err error
	if l != nil {
		close(l.done)
		err = l.ln.Close()
		for c := range l.conns {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// acceptLoop accepts connections for the life l until its listener is
// closed.
func (s *Server) acceptLoop(l *life) {
	defer s.wg.Done()
	for {
		if !s.waitAccepting(l.done) {
			return
		}
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if !sleepUnlessClosed(l.done, 5*time.Millisecond) { // a failed accept (such as EMFILE) is not fatal
				return
			}
			continue
		}
		// PauseAccepting may have come while Accept was blocked: hold the
		// connection unserved, as if it were still in the backlog.
		if !s.waitAccepting(l.done) {
			nc.Close()
			return
		}
		if !s.admitConnection() {
			// Counted first: a client that sees the close finds it in
			// Stats.
			s.stats.connRejected()
			nc.Close() // refused before anything is read, as an overloaded mongod refuses
			continue
		}
		_, silent := s.faults.take(true, "")
		c := &conn{srv: s, nc: nc, id: s.nextConnID.Add(1), life: l}
		s.mu.Lock()
		if s.life != l {
			s.mu.Unlock()
			nc.Close()
			return
		}
		l.conns[c] = struct{}{}
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
			delete(l.conns, c)
			s.mu.Unlock()
			s.stats.connClosed()
		}()
	}
}
