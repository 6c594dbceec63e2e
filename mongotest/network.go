package mongotest

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The ports a Network gives: its servers' from firstPort on, its clients'
// ends from firstEphemeralPort on, as an operating system gives them.
const (
	firstPort          = 27017
	firstEphemeralPort = 49152
)

// Network is an in-memory network: servers listen on it (see WithNetwork
// and Listen) and clients dial them through DialContext, with no socket
// and no goroutine of its own, so that tests of clients run under
// testing/synctest, on its fake clock. Its addresses look like TCP's:
// "127.0.0.1:port", with ports from 27017 on in the order servers listen,
// or the names given to Listen (and to WithAdvertisedHosts).
//
// Its connections behave as TCP connections do: each direction holds a
// megabyte unread before a writer waits; deadlines work (on the bubble's
// clock under synctest), and a Read or Write that meets one fails with an
// error whose Timeout is true and that is os.ErrDeadlineExceeded; a closed
// end fails with net.ErrClosed, and its peer reads io.EOF. A dial to an
// address nobody listens on fails at once with ECONNREFUSED.
//
// Under testing/synctest, create the Network, its servers and its
// clients inside the bubble, and use them only there: everything a
// reader, writer, acceptor or waiting server blocks on is a channel or a
// timer of the bubble, so blocked goroutines are durably blocked and the
// clock moves on. Close the Network before the bubble's function returns:
// it closes every server and connection on it, and their goroutines end.
//
// A Network's methods are safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*listener // by address, host lower-cased
	pipes     map[*pipe]struct{}   // the connections not closed at both ends
	servers   []io.Closer          // the servers and replica sets started on it
	nextPort  int
	nextEphem int
	closed    bool
}

// NewNetwork returns an empty Network.
func NewNetwork() *Network {
	return &Network{listeners: map[string]*listener{}, pipes: map[*pipe]struct{}{},
		nextPort: firstPort, nextEphem: firstEphemeralPort}
}

// WithNetwork makes the server listen on the Network n instead of TCP: a
// standalone on "127.0.0.1:port" with the next free port of n (27017 for
// the first), a replica set's members on one such address each, or on the
// addresses of WithAdvertisedHosts if it is given. Clients reach the
// server through n.DialContext only. n.Close closes the server.
func WithNetwork(n *Network) Option {
	return func(c *config) error {
		if n == nil {
			return errors.New("mongotest: WithNetwork: nil *Network")
		}
		c.network = n
		return nil
	}
}

// Listen listens on address, "host:port", of n: a port 0 (or none given
// as ":0") takes the next free port of n; an empty host is 127.0.0.1.
// Host names are matched without regard to case, but are not resolved:
// "localhost:27017" and "127.0.0.1:27017" are two addresses. It fails
// with EADDRINUSE if someone listens on address already, and once n is
// closed. The listener's Accept returns connections in the order they
// were dialed, which wait for it meanwhile, however long (a dial does not
// wait for Accept, as the TCP handshake of a socket does not).
func (n *Network) Listen(address string) (net.Listener, error) {
	host, port, err := splitAddress(address)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: netAddr{"tcp", address}, Err: net.ErrClosed}
	}
	if port == 0 {
		if port = n.freePortLocked(host); port == 0 {
			return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: netAddr{"tcp", address}, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
		}
	}
	key := net.JoinHostPort(host, strconv.Itoa(port))
	if n.listeners[key] != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: netAddr{"tcp", key}, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	l := &listener{n: n, addr: netAddr{"tcp", key}, changed: make(chan struct{})}
	n.listeners[key] = l
	return l, nil
}

// freePortLocked returns the next port of n that nobody listens on at
// host, 0 if there is none.
func (n *Network) freePortLocked(host string) int {
	for range 65536 - firstPort {
		p := n.nextPort
		if n.nextPort++; n.nextPort > 65535 {
			n.nextPort = firstPort
		}
		if n.listeners[net.JoinHostPort(host, strconv.Itoa(p))] == nil {
			return p
		}
	}
	return 0
}

// DialContext connects to address, "host:port", on n, as net.Dialer's
// DialContext does on TCP (its signature is that of mongopool.WithDialer,
// and n is a ContextDialer of the official driver's SetDialer): network is
// "tcp", "tcp4" or "tcp6". It never waits: it fails at once if ctx is
// over, and with a *net.OpError wrapping ECONNREFUSED if nobody listens on
// address (nor after Close); else the connection waits for the server's
// Accept, as a TCP connection waits in a listener's backlog.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: netAddr{network, address}, Err: err}
	}
	host, port, err := splitAddress(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	key := net.JoinHostPort(host, strconv.Itoa(port))
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.listeners[key]
	if n.closed || l == nil || l.closed {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: netAddr{network, key},
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	local := netAddr{network, net.JoinHostPort("127.0.0.1", strconv.Itoa(n.nextEphem))}
	if n.nextEphem++; n.nextEphem > 65535 {
		n.nextEphem = firstEphemeralPort
	}
	p := newPipe(n, local, netAddr{network, key})
	n.pipes[p] = struct{}{}
	l.backlog = append(l.backlog, &pipeConn{p: p, end: 1})
	l.changeLocked()
	return &pipeConn{p: p, end: 0}, nil
}

// Close closes n: every server and replica set started on it (see
// Server.Close and ReplicaSet.Close, whose errors it returns), every
// listener, and every connection, both ends, whose reads and writes fail
// with net.ErrClosed. It returns once the goroutines of the servers have
// ended. Dials fail afterwards with ECONNREFUSED, and Listen with
// net.ErrClosed. Close is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	servers := n.servers
	n.servers = nil
	pipes := make([]*pipe, 0, len(n.pipes))
	for p := range n.pipes {
		pipes = append(pipes, p)
	}
	n.mu.Unlock()
	// Every end first, so that each sees net.ErrClosed whatever else
	// closes meanwhile; then the servers, which wait for their goroutines;
	// then the listeners left, those of Listen's callers.
	for _, p := range pipes {
		for end := range 2 {
			(&pipeConn{p: p, end: end}).Close()
		}
	}
	var errs []error
	for _, s := range servers {
		if err := s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	n.mu.Lock()
	lns := make([]*listener, 0, len(n.listeners))
	for _, l := range n.listeners {
		lns = append(lns, l)
	}
	n.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	return errors.Join(errs...)
}

// track has Close close s, a server or replica set started on n. If n is
// closed already, it closes s at once.
func (n *Network) track(s io.Closer) {
	n.mu.Lock()
	if !n.closed {
		n.servers = append(n.servers, s)
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	s.Close()
}

// forget drops p, closed at both ends.
func (n *Network) forget(p *pipe) {
	n.mu.Lock()
	delete(n.pipes, p)
	n.mu.Unlock()
}

// splitAddress splits a "host:port" address of a Network: the host
// lower-cased, 127.0.0.1 if empty; the port from 0 to 65535.
func splitAddress(address string) (host string, port int, err error) {
	host, ps, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, &net.AddrError{Err: "invalid port", Addr: address}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return strings.ToLower(host), port, nil
}

// listener is a listener of a Network.
type listener struct {
	n    *Network
	addr netAddr
	// The fields below are guarded by n.mu.
	backlog []*pipeConn // dialed, not yet accepted
	closed  bool
	// changed is closed, and replaced, when backlog or closed change.
	changed chan struct{}
}

func (l *listener) changeLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Accept waits for the next connection dialed to the listener's address,
// and returns its server end. It fails with net.ErrClosed once the
// listener is closed.
func (l *listener) Accept() (net.Conn, error) {
	n := l.n
	n.mu.Lock()
	for {
		if l.closed {
			n.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: l.addr.net, Addr: l.addr, Err: net.ErrClosed}
		}
		if len(l.backlog) > 0 {
			c := l.backlog[0]
			l.backlog[0] = nil
			l.backlog = l.backlog[1:]
			n.mu.Unlock()
			return c, nil
		}
		ch := l.changed
		n.mu.Unlock()
		<-ch
		n.mu.Lock()
	}
}

// Close closes the listener: its address is free again, dials to it are
// refused, and the connections that waited for Accept are reset, as a
// socket's backlog is. Closing twice fails with net.ErrClosed.
func (l *listener) Close() error {
	n := l.n
	n.mu.Lock()
	if l.closed {
		n.mu.Unlock()
		return &net.OpError{Op: "close", Net: l.addr.net, Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	if n.listeners[l.addr.addr] == l {
		delete(n.listeners, l.addr.addr)
	}
	backlog := l.backlog
	l.backlog = nil
	l.changeLocked()
	n.mu.Unlock()
	for _, c := range backlog {
		c.resetConn()
	}
	return nil
}

// Addr returns the address the listener listens on.
func (l *listener) Addr() net.Addr { return l.addr }
