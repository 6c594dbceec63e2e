//go:build unix

package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawSocket is a Conn's socket as its descriptor, when it has one the
// runtime polls: a TCP or Unix domain connection's.
type rawSocket struct {
	c  *Conn
	rc syscall.RawConn // nil: Defer writes at once
	// The read under way's buffer and outcome, fields rather than a
	// closure's captures so that a read allocates nothing.
	p      []byte
	n      int
	err    error
	readFn func(fd uintptr) bool // writeThenRead, bound once
	// emptyReads counts reads after a kept message's write that found
	// nothing: the reads this package saves, which its tests see stay 0.
	emptyReads int
}

func (r *rawSocket) init(c *Conn, nc net.Conn) {
	var sc syscall.Conn
	switch nc := nc.(type) {
	case *net.TCPConn:
		sc = nc
	case *net.UnixConn:
		sc = nc
	default:
		return // a wrapper's reads and writes are its own
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	r.c, r.rc = c, rc
	r.readFn = r.writeThenRead
}

func (r *rawSocket) ok() bool { return r.rc != nil }

// writeRead writes the kept message and reads into p in one RawConn.Read.
// It returns (0, nil) when the message could not all be written without
// waiting: the caller writes the rest and reads as usual.
func (r *rawSocket) writeRead(p []byte) (int, error) {
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.readFn)
	n, rerr := r.n, r.err
	r.p, r.err = nil, nil
	if err != nil {
		return 0, err // closed, or past the read deadline
	}
	return n, rerr
}

// writeThenRead is the RawConn.Read callback: while a message is kept it
// writes it and asks to wait for readability (false); then it reads. The
// runtime forgot the socket's readiness before the first call, so the
// wait ends only on bytes that came after, the answer's.
func (r *rawSocket) writeThenRead(fd uintptr) bool {
	c := r.c
	for len(c.pending) > 0 {
		m, err := syscall.Write(int(fd), c.pending)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true // the buffer is full: the caller writes the rest
		case err != nil:
			c.pending = nil
			r.err = &WriteError{Err: os.NewSyscallError("write", err)}
			return true
		}
		c.pending = c.pending[m:]
		if len(c.pending) > 0 {
			return true // part of it: the rest waits for room
		}
		return false
	}
	for {
		m, err := syscall.Read(int(fd), r.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			r.emptyReads++
			return false // woken for bytes another read took: wait on
		case err != nil:
			r.err = os.NewSyscallError("read", err)
		case m == 0:
			r.err = io.EOF
		}
		r.n = max(m, 0)
		return true
	}
}

// readable peeks at the socket without waiting.
func (r *rawSocket) readable() bool {
	if r.rc == nil {
		return false
	}
	ready := false
	r.rc.Control(func(fd uintptr) {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ready = err != syscall.EAGAIN && err != syscall.EINTR
	})
	return ready
}
