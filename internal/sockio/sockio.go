// Package sockio writes a request and waits for its answer in one wait of
// the runtime's poller, saving the read that would find the socket empty.
//
// A connection that alternates requests and answers (a driver's, a proxy's
// on either side) writes a message, then reads. Go's net.Conn.Read always
// tries the socket first, because the runtime forgets a socket's readiness
// when a read begins: right after a write, the answer cannot have come yet,
// so that first try is a system call that finds nothing, once per message.
//
// Conn.Defer keeps the message instead, and the next Read writes it from
// within the read (syscall.RawConn.Read, whose callback runs after the
// readiness was forgotten): the answer's arrival, which can only follow the
// write, then wakes the read, whose one system call finds it. On sockets
// without a descriptor (TLS, pipes) and systems without the calls, Defer
// writes at once and Read is the connection's.
//
// The price: bytes the peer sent before that read began, and that no read
// took yet, wake it not; it sees them only when more come. So Defer is for
// a peer that sends nothing before it has the message (a server, which
// answers only what it is asked; a client that waits for its replies), or
// for a read with a deadline after which the caller reads again.
package sockio

import "net"

// Conn reads a connection; its Read first writes what Defer kept. Its
// methods are for one goroutine, the connection's reader, which is also
// the only writer while a message is kept.
type Conn struct {
	nc      net.Conn
	pending []byte // kept by Defer, written by the next Read or Flush
	raw     rawSocket
}

// New returns a Conn reading nc.
func New(nc net.Conn) *Conn {
	c := &Conn{nc: nc}
	c.raw.init(c, nc)
	return c
}

// WriteError is a failure to write the message Defer kept: the request was
// not sent whole, as a write's error says for a plain write.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "writing: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Fused reports whether Defer keeps messages: the connection has a socket
// whose readiness the runtime's poller tracks.
func (c *Conn) Fused() bool { return c.raw.ok() }

// Defer keeps b to be written by the next Read, before it waits; b must not
// change until then. That read waits for bytes that come after b is
// written (see the package doc). On a connection that cannot, or when a message is
// kept already, it writes now (the kept message first). The caller's write
// deadline applies to what is written by Read only when the socket's buffer
// is full: a fused write does not wait.
func (c *Conn) Defer(b []byte) error {
	if !c.raw.ok() || len(c.pending) > 0 {
		if err := c.Flush(); err != nil {
			return err
		}
		_, err := c.nc.Write(b)
		return err
	}
	c.pending = b
	return nil
}

// Pending reports whether a message is kept, to be written by the next
// Read or Flush.
func (c *Conn) Pending() bool { return len(c.pending) > 0 }

// Flush writes the kept message, if any, now: before a wait that is not a
// read of the answer, or before closing.
func (c *Conn) Flush() error {
	if len(c.pending) == 0 {
		return nil
	}
	b := c.pending
	c.pending = nil
	if _, err := c.nc.Write(b); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

// Readable reports whether the socket has bytes to read, or an end or an
// error to report, without reading; false without a socket.
func (c *Conn) Readable() bool { return c.raw.readable() }

// Read reads into p, writing the kept message first. A failure to write it
// is a *WriteError, and nothing is read.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 || len(p) == 0 {
		return c.nc.Read(p)
	}
	n, err := c.raw.writeRead(p)
	if len(c.pending) > 0 {
		// Not written whole: the socket's buffer was full (the rest
		// waits for room under the write deadline), or the read failed
		// before writing (a deadline already past, say): what was asked
		// is still written, as a separate Write would have.
		if werr := c.Flush(); werr != nil {
			return 0, werr
		}
		if err == nil && n == 0 {
			return c.nc.Read(p)
		}
	}
	return n, err
}
