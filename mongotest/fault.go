package mongotest

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mongopool/mongopool/wire"
)

// FaultKind says what an injected Fault does. The faults go beyond what a
// real MongoDB server does (for that, see failpoints): they break the wire
// protocol or the connection, so that tests can check how a client copes.
type FaultKind int

// The kinds of fault. All but FaultSilentAccept apply to the reply to a
// command; FaultSilentAccept applies to the accepting of a connection.
const (
	// FaultDelay waits Fault.Delay, then sends the reply as usual. Closing
	// the server ends the wait (and the connection) at once.
	FaultDelay FaultKind = iota + 1
	// FaultHang never sends the reply. The connection stays open, and
	// whatever the client sends on it is read and thrown away, until the
	// client hangs up or the server is closed.
	FaultHang
	// FaultWrongResponseTo sends the reply with a responseTo that is not
	// the request's requestID. The connection stays open.
	FaultWrongResponseTo
	// FaultTruncatedFrame sends the reply's header and part of its body,
	// then closes the connection in an orderly way: the client reads the end
	// of the stream inside the message.
	FaultTruncatedFrame
	// FaultNegativeLength sends the reply with messageLength -1, then closes
	// the connection.
	FaultNegativeLength
	// FaultTinyLength sends the reply with messageLength 4, less than the
	// 16-byte header, then closes the connection.
	FaultTinyLength
	// FaultHugeLength sends the reply with messageLength 1 GiB
	// (HugeMessageLength), far beyond MaxMessageSize, then closes the
	// connection.
	FaultHugeLength
	// FaultNotBSON sends a reply whose header and framing are valid but
	// whose document is garbage: its length is right, its elements are not
	// BSON. A compressed reply is compressed garbage. The connection stays
	// open.
	FaultNotBSON
	// FaultResetMidReply sends the reply's header and part of its body,
	// then resets the connection (SO_LINGER 0, so the kernel sends RST
	// rather than FIN): the client's next read fails with ECONNRESET.
	FaultResetMidReply
	// FaultSilentAccept makes the server accept connections and then never
	// read or answer anything on them, not even a TLS handshake, until the
	// client hangs up or the server is closed. Fault.Commands must be empty,
	// and Fault.Times counts connections.
	FaultSilentAccept
)

// HugeMessageLength is the messageLength that FaultHugeLength declares.
const HugeMessageLength = 1 << 30

var faultNames = [...]string{
	FaultDelay:           "FaultDelay",
	FaultHang:            "FaultHang",
	FaultWrongResponseTo: "FaultWrongResponseTo",
	FaultTruncatedFrame:  "FaultTruncatedFrame",
	FaultNegativeLength:  "FaultNegativeLength",
	FaultTinyLength:      "FaultTinyLength",
	FaultHugeLength:      "FaultHugeLength",
	FaultNotBSON:         "FaultNotBSON",
	FaultResetMidReply:   "FaultResetMidReply",
	FaultSilentAccept:    "FaultSilentAccept",
}

// String returns the kind's Go name, "FaultHang" for instance.
func (k FaultKind) String() string {
	if k > 0 && int(k) < len(faultNames) {
		return faultNames[k]
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is a fault to inject with Server.InjectFault.
type Fault struct {
	// Kind is what the fault does.
	Kind FaultKind
	// Commands are the names of the commands whose replies the fault
	// applies to; empty means every command. Names are matched exactly, as
	// MongoDB matches command names, except that "hello", "isMaster" and
	// "ismaster" each stand for all three, so that a fault can target the
	// handshake however a client spells it.
	Commands []string
	// Delay is how long FaultDelay waits; it must be positive for
	// FaultDelay and zero for the other kinds.
	Delay time.Duration
	// Times is how many replies (connections, for FaultSilentAccept) the
	// fault applies to before it removes itself; 0 means until it is
	// removed.
	Times int
}

// InjectFault makes the server misbehave as f says, from now until remove
// is called or f.Times is used up. When several faults match a reply, the
// one injected first applies, and only it. A fault applies only to a
// message that gets a reply: a request with moreToCome set is answered by
// nothing, so faults ignore it.
//
// remove is idempotent and safe to call after Close. Removing a fault does
// not undo what it has already done: a reply that hangs keeps hanging, and
// a connection accepted silently stays silent.
//
// InjectFault returns an error, and injects nothing, if f is invalid (an
// unknown kind, a Delay that its kind does not take, a negative Times, an
// empty command name, commands for FaultSilentAccept) or if the server is
// closed.
func (s *Server) InjectFault(f Fault) (remove func(), err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	af := &activeFault{Fault: f, left: f.Times}
	af.Commands = slices.Clone(f.Commands)
	for i, name := range af.Commands {
		af.Commands[i] = canonicalCommand(name)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("mongotest: InjectFault: the server is closed")
	}
	s.faults.add(af)
	return func() { s.faults.remove(af) }, nil
}

// validate checks that f makes sense.
func (f *Fault) validate() error {
	if f.Kind < FaultDelay || f.Kind > FaultSilentAccept {
		return fmt.Errorf("mongotest: InjectFault: unknown fault kind %d", int(f.Kind))
	}
	switch {
	case f.Kind == FaultDelay && f.Delay <= 0:
		return fmt.Errorf("mongotest: InjectFault: FaultDelay needs a positive Delay, got %v", f.Delay)
	case f.Kind != FaultDelay && f.Delay != 0:
		return fmt.Errorf("mongotest: InjectFault: %v takes no Delay, got %v", f.Kind, f.Delay)
	case f.Times < 0:
		return fmt.Errorf("mongotest: InjectFault: Times is %d; it must be 0 (until removed) or positive", f.Times)
	case f.Kind == FaultSilentAccept && len(f.Commands) > 0:
		return fmt.Errorf("mongotest: InjectFault: FaultSilentAccept applies to connections, before any command, so it takes no Commands (got %q)", f.Commands)
	}
	for _, name := range f.Commands {
		if name == "" {
			return errors.New("mongotest: InjectFault: an empty command name in Commands")
		}
	}
	return nil
}

// canonicalCommand folds the names of the hello command into one.
func canonicalCommand(name string) string {
	switch name {
	case "hello", "isMaster", "ismaster":
		return "hello"
	}
	return name
}

// activeFault is an injected fault and how many more times it applies.
type activeFault struct {
	Fault
	left int // with Times > 0: applications left
}

// faultSet is a server's injected faults, in the order of injection.
type faultSet struct {
	mu     sync.Mutex
	faults []*activeFault
}

func (fs *faultSet) add(af *activeFault) {
	fs.mu.Lock()
	fs.faults = append(fs.faults, af)
	fs.mu.Unlock()
}

func (fs *faultSet) remove(af *activeFault) {
	fs.mu.Lock()
	fs.faults = slices.DeleteFunc(fs.faults, func(x *activeFault) bool { return x == af })
	fs.mu.Unlock()
}

// take returns the first fault that matches, counting one application of
// it, and false if none does. forAccept selects FaultSilentAccept; otherwise
// name is the command being answered.
func (fs *faultSet) take(forAccept bool, name string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.faults) == 0 {
		return Fault{}, false
	}
	name = canonicalCommand(name)
	for i, af := range fs.faults {
		if (af.Kind == FaultSilentAccept) != forAccept {
			continue
		}
		if !forAccept && len(af.Commands) > 0 && !slices.Contains(af.Commands, name) {
			continue
		}
		if af.Times > 0 {
			af.left--
			if af.left == 0 {
				fs.faults = slices.Delete(fs.faults, i, i+1)
			}
		}
		return af.Fault, true
	}
	return Fault{}, false
}

// errFaultClosed ends the serving of a connection that a fault broke. It is
// not a protocol error of the client's, so the server does not count it as
// one.
var errFaultClosed = errors.New("mongotest: connection ended by an injected fault")

// writeFaulty sends msg, the uncompressed reply to the command name, as the
// fault f says. An error means the connection must be closed.
func (c *conn) writeFaulty(f Fault, msg []byte, name string, compressor int) error {
	switch f.Kind {
	case FaultDelay:
		if !sleepUnlessClosed(c.life.done, f.Delay) {
			return errFaultClosed
		}
	case FaultHang:
		// Keep reading, so that the goroutine ends as soon as the client
		// hangs up or Close closes the connection.
		io.Copy(io.Discard, c.nc)
		return errFaultClosed
	case FaultWrongResponseTo:
		msg = slices.Clone(msg)
		responseTo := binary.LittleEndian.Uint32(msg[8:])
		binary.LittleEndian.PutUint32(msg[8:], responseTo+1)
	case FaultNotBSON:
		msg = garbleDocument(msg)
	}
	out, err := c.encodeReply(msg, name, compressor)
	if err != nil {
		return err
	}
	switch f.Kind {
	case FaultTruncatedFrame:
		c.nc.Write(out[:cutPoint(out)])
		return errFaultClosed
	case FaultResetMidReply:
		c.nc.Write(out[:cutPoint(out)])
		resetConn(c.nc)
		return errFaultClosed
	case FaultNegativeLength, FaultTinyLength, FaultHugeLength:
		length := int32(HugeMessageLength)
		switch f.Kind {
		case FaultNegativeLength:
			length = -1
		case FaultTinyLength:
			length = 4
		}
		out = slices.Clone(out)
		binary.LittleEndian.PutUint32(out, uint32(length))
		c.nc.Write(out)
		return errFaultClosed
	}
	return wire.WriteMessage(c.nc, out)
}

// cutPoint returns where to cut msg so that the client gets the whole
// header and part of the body: it then waits for bytes that never come.
func cutPoint(msg []byte) int {
	return max(wire.HeaderSize+1, len(msg)/2)
}

// garbleDocument returns a copy of msg, an OP_MSG or OP_REPLY with one
// document, in which the document keeps its length and terminating zero but
// its elements are replaced by bytes that are no BSON type.
func garbleDocument(msg []byte) []byte {
	msg = slices.Clone(msg)
	at := wire.HeaderSize + 4 + 1 // OP_MSG: flagBits, then the kind 0 section
	if wire.OpCode(binary.LittleEndian.Uint32(msg[12:])) == opReply {
		at = wire.HeaderSize + 20 // responseFlags, cursorID, startingFrom, numberReturned
	}
	if at+5 > len(msg) {
		return msg
	}
	n := int(binary.LittleEndian.Uint32(msg[at:]))
	end := min(at+n-1, len(msg)-1)
	for i := at + 4; i < end; i++ {
		msg[i] = 0xEE // not an element type
	}
	return msg
}

// resetConn closes nc so that the peer gets a TCP RST rather than a FIN.
// For a TLS connection it resets the TCP connection underneath, without a
// close_notify alert.
func resetConn(nc net.Conn) {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	switch raw := raw.(type) {
	case *net.TCPConn:
		raw.SetLinger(0)
	case *pipeConn:
		raw.resetConn()
		return
	}
	raw.Close()
}

// silence keeps an accepted connection open and never answers on it: it
// reads and throws away what the client sends, below TLS, until the client
// hangs up or Close closes the connection.
func (c *conn) silence() {
	defer c.nc.Close()
	raw := c.nc
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn() // reading the tls.Conn would run the handshake
	}
	io.Copy(io.Discard, raw)
}
