package mongotest

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// This file implements the connections of a Network: in-memory pipes with
// a buffer in each direction, as a socket has, deadlines and the errors of
// a TCP connection. Every wait is on a channel or a timer, so that a
// goroutine blocked on one is durably blocked for testing/synctest, and
// no goroutine is started.

// pipeCapacity is how many bytes each direction of a connection holds
// unread, as the socket buffers of a TCP connection do: a Write waits only
// once its peer has this much to read. A server writing a reply while its
// client writes the next request therefore does not wait on the client.
const pipeCapacity = 1 << 20

// pipe is one connection of a Network, and both its ends: end 0 is the
// client's (the dialer's), end 1 the server's (the one Accept returns).
type pipe struct {
	n *Network

	mu sync.Mutex
	// changed is closed, and replaced, at each change of what follows: the
	// waiting readers and writers then look again.
	changed chan struct{}
	buf     [2][]byte // buf[i]: what end i has to read
	closed  [2]bool   // end i is closed
	reset   [2]bool   // end i was closed with a reset (see resetConn)
	writing [2]bool   // end i has a Write in progress
	readDL  [2]time.Time
	writeDL [2]time.Time
	// addr[i] is end i's local address, and the other end's remote one.
	addr [2]netAddr
}

// newPipe returns a connection between the client address client and the
// server address server.
func newPipe(n *Network, client, server netAddr) *pipe {
	return &pipe{n: n, changed: make(chan struct{}), addr: [2]netAddr{client, server}}
}

// changeLocked wakes everyone waiting on p.
func (p *pipe) changeLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitLocked waits, with p.mu unlocked, until p changes or deadline (if
// not zero) passes; p.mu is locked again on return.
func (p *pipe) waitLocked(deadline time.Time) {
	ch := p.changed
	p.mu.Unlock()
	defer p.mu.Lock()
	if deadline.IsZero() {
		<-ch
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// expired reports whether the deadline dl is set and past.
func expired(dl time.Time) bool { return !dl.IsZero() && !time.Now().Before(dl) }

// pipeConn is one end of a pipe: a net.Conn.
type pipeConn struct {
	p   *pipe
	end int
}

var _ net.Conn = (*pipeConn)(nil)

// opError returns err as the net.Conn of a socket returns it.
func (c *pipeConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.p.addr[c.end].net, Source: c.p.addr[c.end], Addr: c.p.addr[1-c.end], Err: err}
}

// Read reads what the peer wrote: it waits for it, and fails with a
// timeout once the read deadline passes, net.ErrClosed once this end is
// closed, io.EOF once the peer closed and everything it wrote is read,
// and ECONNRESET (after what it wrote) if the peer reset the connection.
func (c *pipeConn) Read(b []byte) (int, error) {
	p, i := c.p, c.end
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.closed[i]:
			return 0, c.opError("read", net.ErrClosed)
		case expired(p.readDL[i]):
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		case len(p.buf[i]) > 0:
			n := copy(b, p.buf[i])
			if p.buf[i] = p.buf[i][n:]; len(p.buf[i]) == 0 {
				p.buf[i] = nil
			}
			p.changeLocked() // room for the peer's writes
			return n, nil
		case len(b) == 0:
			return 0, nil
		case p.reset[1-i]:
			return 0, c.opError("read", os.NewSyscallError("read", syscall.ECONNRESET))
		case p.closed[1-i]:
			return 0, io.EOF
		}
		p.waitLocked(p.readDL[i])
	}
}

// Write writes b for the peer to read, waiting while the peer has
// pipeCapacity bytes unread. One Write at a time goes through on each
// end, as on a socket, so that concurrent writes do not interleave. It
// fails with a timeout once the write deadline passes, net.ErrClosed once
// this end is closed, and EPIPE (ECONNRESET after a reset) once the peer
// is closed.
func (c *pipeConn) Write(b []byte) (int, error) {
	p, i, o := c.p, c.end, 1-c.end
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.writing[i] {
		if err := c.writeErrLocked(); err != nil {
			return 0, err
		}
		p.waitLocked(p.writeDL[i])
	}
	p.writing[i] = true
	defer func() {
		p.writing[i] = false
		p.changeLocked()
	}()
	n := 0
	for {
		if err := c.writeErrLocked(); err != nil {
			return n, err
		}
		if n == len(b) {
			return n, nil
		}
		if room := pipeCapacity - len(p.buf[o]); room > 0 {
			k := min(room, len(b)-n)
			p.buf[o] = append(p.buf[o], b[n:n+k]...)
			n += k
			p.changeLocked()
			continue
		}
		p.waitLocked(p.writeDL[i])
	}
}

// writeErrLocked returns why a Write cannot go on, nil if it can.
func (c *pipeConn) writeErrLocked() error {
	p, i, o := c.p, c.end, 1-c.end
	switch {
	case p.closed[i]:
		return c.opError("write", net.ErrClosed)
	case expired(p.writeDL[i]):
		return c.opError("write", os.ErrDeadlineExceeded)
	case p.reset[o]:
		return c.opError("write", os.NewSyscallError("write", syscall.ECONNRESET))
	case p.closed[o]:
		return c.opError("write", os.NewSyscallError("write", syscall.EPIPE))
	}
	return nil
}

// Close closes this end: its reads and writes fail with net.ErrClosed,
// what it had to read is dropped, and the peer reads what is left then
// io.EOF. Closing twice fails with net.ErrClosed.
func (c *pipeConn) Close() error { return c.close(false) }

// resetConn closes this end so that the peer's reads fail with
// ECONNRESET (once it has read what was written), as after a TCP RST.
func (c *pipeConn) resetConn() { c.close(true) }

func (c *pipeConn) close(reset bool) error {
	p, i := c.p, c.end
	p.mu.Lock()
	if p.closed[i] {
		p.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	p.closed[i], p.reset[i] = true, reset
	p.buf[i] = nil
	p.changeLocked()
	both := p.closed[1-i]
	p.mu.Unlock()
	if both {
		p.n.forget(p)
	}
	return nil
}

// LocalAddr returns this end's address: for a client, an address of the
// Network's own ("127.0.0.1:port"), for a server, its listener's.
func (c *pipeConn) LocalAddr() net.Addr { return c.p.addr[c.end] }

// RemoteAddr returns the peer's address.
func (c *pipeConn) RemoteAddr() net.Addr { return c.p.addr[1-c.end] }

// SetDeadline sets the read and write deadlines.
func (c *pipeConn) SetDeadline(t time.Time) error {
	return c.setDeadline(t, true, true)
}

// SetReadDeadline sets the read deadline: a Read waiting when it passes
// fails with a timeout, and so does any Read after it, until it is moved.
// A zero t means no deadline.
func (c *pipeConn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(t, true, false)
}

// SetWriteDeadline sets the write deadline, as SetReadDeadline sets the
// read one.
func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(t, false, true)
}

func (c *pipeConn) setDeadline(t time.Time, read, write bool) error {
	p, i := c.p, c.end
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed[i] {
		return c.opError("set deadline", net.ErrClosed)
	}
	if read {
		p.readDL[i] = t
	}
	if write {
		p.writeDL[i] = t
	}
	p.changeLocked()
	return nil
}

// netAddr is an address of a Network.
type netAddr struct {
	net  string // "tcp", or the network a client dialed
	addr string // "host:port"
}

func (a netAddr) Network() string { return a.net }
func (a netAddr) String() string  { return a.addr }
