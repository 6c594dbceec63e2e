package connection

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/sockio"
	"github.com/mongopool/mongopool/wire"
)

// Conn is an established connection. It runs one command at a time (the
// specification's "single track"); Close may be called from another goroutine
// to interrupt a command in progress.
type Conn struct {
	nc            net.Conn
	br            *bufio.Reader // reads sock: a reply's header and body in one read when it fits
	sock          *sockio.Conn  // nc, writing a kept request as the reply's read begins
	address       string
	desc          *handshake.Description
	compressor    wire.CompressorID // negotiated; 0 (noop) for none
	zlibLevel     int
	socketTimeout time.Duration
	buf           []byte // encoding buffer, reused
	poller        *BusyPoller
	pollSock      *PolledSocket // nc's, as poller polls it
	longPoll      bool          // the request was a getMore: see exchange

	// The server's limits (MongoDB's until its hello reply tells them,
	// the hello's own bound for that reply), and the compressors its
	// replies may use: those both sides listed, or, for the hello reply,
	// those the hello offered.
	maxBSON    int32
	maxMessage int32
	accept     []wire.CompressorID

	// broken holds the error that broke the connection, set once. The pool
	// reads it on every check-out and check-in, under its own lock: an
	// atomic keeps that read to a load.
	broken atomic.Pointer[error]
	closed atomic.Bool

	// moreToCome is set while the server streams replies to an exhaust
	// command: lastReplyID is the requestID of the last one, which the
	// next one answers.
	moreToCome  bool
	lastReplyID int32

	// deadlineSet: the socket may have a deadline (setDeadline's, or the
	// one a canceled context moved to the past), which an exchange without
	// one must clear.
	deadlineSet atomic.Bool
	interruptFn func() // c.interrupt, bound once
}

// Address returns the server's address.
func (c *Conn) Address() string { return c.address }

// Description returns what the server said in its hello reply: limits,
// connectionId, serviceId, negotiated compressor.
func (c *Conn) Description() *handshake.Description { return c.desc }

// Err returns nil while the connection is fit for reuse, and the error that
// broke it otherwise: a network error or timeout, a protocol error, or Close.
// A server's error reply (ok: 0) does not break a connection.
func (c *Conn) Err() error {
	if e := c.broken.Load(); e != nil {
		return *e
	}
	return nil
}

// Close closes the socket. A command in progress fails.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.fail(net.ErrClosed)
	return c.nc.Close()
}

// fail records the error that broke the connection (the first one wins) and
// returns it.
func (c *Conn) fail(err error) error {
	c.broken.CompareAndSwap(nil, &err)
	return err
}

// RoundTrip sends one command (a document that includes "$db") and returns the
// server's reply body. A reply with ok: 0 is returned as a *wire.CommandError
// and leaves the connection usable; any network or protocol error breaks it
// (see Err). The deadline is the earliest of ctx's and socketTimeoutMS; ctx
// being canceled interrupts the I/O, and the decompression of a reply.
//
// A command larger than the server accepts (maxBsonObjectSize plus
// wire.CommandOverhead, or maxMessageSizeBytes for its message) is refused
// with a *wire.SizeLimitError before anything is sent, and so is a reply
// whose decompression ctx ends: both leave the connection usable. A command
// whose message would exceed maxMessageSizeBytes only once compressed is
// sent uncompressed.
func (c *Conn) RoundTrip(ctx context.Context, cmd bson.Raw) (bson.Raw, error) {
	reply, err := c.roundTrip(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return reply, wire.CheckReply(reply)
}

// RoundTripExhaust is RoundTrip for a command that may be answered by a
// stream of replies (the OP_MSG specification's exhaust): it sends cmd with
// the exhaustAllowed flag and returns the first reply. When that reply has
// the moreToCome flag, MoreToCome reports true and the next replies are read
// with ReadMore, without sending anything; until the stream ends (a reply
// without moreToCome), RoundTrip and RoundTripExhaust refuse to send.
//
// The specification allows the flag on hello, legacy hello and getMore only:
// any other command is refused before anything is sent.
func (c *Conn) RoundTripExhaust(ctx context.Context, cmd bson.Raw) (bson.Raw, error) {
	switch name := commandName(cmd); name {
	case "hello", "isMaster", "ismaster", "getMore":
	default:
		return nil, fmt.Errorf("connection to %s: the exhaustAllowed flag is for hello, legacy hello and getMore only, not %q", c.address, name)
	}
	reply, err := c.exchange(ctx, cmd, nil, wire.ExhaustAllowed)
	if err != nil {
		return nil, err
	}
	return reply, wire.CheckReply(reply)
}

// Send sends cmd with the moreToCome flag, which asks the server not to
// reply (the OP_MSG specification's unacknowledged writes, whose write
// concern is {w: 0}), and returns once it is written: whether the command
// succeeded is not known. It refuses what RoundTrip refuses; a network
// error breaks the connection.
func (c *Conn) Send(ctx context.Context, cmd bson.Raw) error {
	_, err := c.exchange(ctx, cmd, nil, wire.MoreToCome)
	return err
}

// RoundTripMsg is RoundTrip for a command whose arguments come partly as
// document sequences (the OP_MSG kind 1 sections, such as an insert's
// "documents"), as a proxy relays them: cmd is the body, seqs the
// sequences, sent as they are. The size limits apply to the body
// (maxBsonObjectSize) and to the whole message (maxMessageSizeBytes).
func (c *Conn) RoundTripMsg(ctx context.Context, cmd bson.Raw, seqs []wire.Sequence) (bson.Raw, error) {
	reply, err := c.exchange(ctx, cmd, seqs, 0)
	if err != nil {
		return nil, err
	}
	return reply, wire.CheckReply(reply)
}

// SendMsg is Send for a command with document sequences (see RoundTripMsg):
// sent with moreToCome, no reply read.
func (c *Conn) SendMsg(ctx context.Context, cmd bson.Raw, seqs []wire.Sequence) error {
	_, err := c.exchange(ctx, cmd, seqs, wire.MoreToCome)
	return err
}

// MoreToCome reports whether the last reply had the moreToCome flag: the
// server will send another reply to the same command, which ReadMore reads.
func (c *Conn) MoreToCome() bool { return c.moreToCome }

// ReadMore reads the next reply of a stream that RoundTripExhaust started,
// without sending anything, and returns it as RoundTrip would. It waits until
// the server sends it, within ctx and socketTimeoutMS. It fails without any
// I/O when no reply is coming (MoreToCome is false).
//
// A streamed reply gets every check of a reply (the maximum message size
// included), and must answer the previous reply of the stream (its
// responseTo is that reply's requestID); an error reply (ok: 0) must end the
// stream. A reply that breaks these rules breaks the connection. So does
// an interruption of its decompression by ctx, as the stream's state is
// then unknown.
func (c *Conn) ReadMore(ctx context.Context) (bson.Raw, error) {
	if err := c.Err(); err != nil {
		return nil, fmt.Errorf("connection to %s is no longer usable: %w", c.address, err)
	}
	if !c.moreToCome {
		return nil, fmt.Errorf("connection to %s: no reply is coming (the last reply did not have moreToCome set)", c.address)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, has := c.setDeadline(ctx)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.interruptFn)
		defer stop()
	}
	reply, err := c.receive(ctx, deadline, has, c.lastReplyID, true)
	if err != nil {
		return nil, err
	}
	return reply, wire.CheckReply(reply)
}

// roundTrip is RoundTrip without the check of ok.
func (c *Conn) roundTrip(ctx context.Context, cmd bson.Raw) (bson.Raw, error) {
	return c.exchange(ctx, cmd, nil, 0)
}

// exchange sends cmd (and seqs, its document sequences) in an OP_MSG with
// flags and reads the reply, without checking its ok; with moreToCome, it
// reads none.
func (c *Conn) exchange(ctx context.Context, cmd bson.Raw, seqs []wire.Sequence, flags wire.Flag) (bson.Raw, error) {
	if err := c.Err(); err != nil {
		return nil, fmt.Errorf("connection to %s is no longer usable: %w", c.address, err)
	}
	if c.moreToCome {
		// Sending now would interleave a request with the replies of the
		// previous one; the server would not read it before the stream
		// ends anyway.
		return nil, fmt.Errorf("connection to %s: replies are still coming to an exhaust command: read them with ReadMore first", c.address)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Refuse what the server would refuse, before encoding anything: the
	// server would close the connection rather than answer.
	if maxCmd := int(c.maxBSON) + wire.CommandOverhead; len(cmd) > maxCmd {
		return nil, &wire.SizeLimitError{Limit: "maxBsonObjectSize", Size: len(cmd), Max: maxCmd}
	}
	if size := msgOverhead + len(cmd) + sequencesSize(seqs); size > int(c.maxMessage) {
		return nil, &wire.SizeLimitError{Limit: "maxMessageSizeBytes", Size: size, Max: int(c.maxMessage)}
	}
	requestID := wire.NextRequestID()
	msg, err := wire.AppendMsg(c.buf[:0], requestID, 0, &wire.Msg{Flags: flags, Body: cmd, Sequences: seqs})
	if err != nil {
		return nil, err // a bad command document: the connection is fine
	}
	c.buf = msg[:0]
	if c.compressor != wire.CompressorNoop && wire.Compressible(commandName(cmd)) {
		comp, err := wire.AppendCompressed(nil, msg, c.compressor, c.zlibLevel)
		if err != nil {
			return nil, err
		}
		if len(comp) <= int(c.maxMessage) { // else incompressible: sent as it is
			msg = comp
		}
	}

	deadline, has := c.setDeadline(ctx)
	// A canceled context interrupts the I/O by moving the deadline to the
	// past. A context that cannot be canceled needs no watch, which saves
	// its allocations.
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.interruptFn)
		defer stop()
	}

	// A getMore may wait for data, a second or more (tailable awaitData
	// cursors, change streams): it is neither polled for nor counted as
	// a reply that is awaited, lest one open change stream stop polling.
	c.longPoll = c.poller != nil && isGetMore(cmd)
	if c.sock.Fused() && flags&wire.MoreToCome == 0 && c.br.Buffered() == 0 && (c.longPoll || !c.pollSock.mayPoll(0)) {
		// The request goes out as the read of its reply begins, which
		// then waits for the reply instead of trying the socket first,
		// a system call saved (see sockio). A server sends nothing
		// unasked, so the socket holds nothing before the reply. A reply
		// that may be polled for is not: the poll comes between the
		// write and the read.
		if err := c.sock.Defer(msg); err != nil {
			return nil, c.ioError(ctx, "sending the command", err)
		}
		return c.receive(ctx, deadline, has, requestID, flags&wire.ExhaustAllowed != 0)
	}
	if err := wire.WriteMessage(c.nc, msg); err != nil {
		return nil, c.ioError(ctx, "sending the command", err)
	}
	if flags&wire.MoreToCome != 0 {
		return nil, nil // no reply comes
	}
	return c.receive(ctx, deadline, has, requestID, flags&wire.ExhaustAllowed != 0)
}

// interrupt moves the socket's deadline to the past: the I/O under way
// fails at once. A context's end calls it.
func (c *Conn) interrupt() {
	c.deadlineSet.Store(true)
	c.nc.SetDeadline(time.Unix(1, 0))
}

// setDeadline sets the socket's deadline to the earliest of ctx's and
// socketTimeoutMS from now, or none, and returns it.
func (c *Conn) setDeadline(ctx context.Context) (time.Time, bool) {
	deadline, has := ctx.Deadline()
	if c.socketTimeout > 0 {
		if d := time.Now().Add(c.socketTimeout); !has || d.Before(deadline) {
			deadline, has = d, true
		}
	}
	if has {
		c.deadlineSet.Store(true)
		c.nc.SetDeadline(deadline)
	} else if c.deadlineSet.Load() {
		// No deadline now: clear the last one, once (clearing what is
		// clear already costs the runtime's timer work each time).
		c.deadlineSet.Store(false)
		c.nc.SetDeadline(time.Time{})
	}
	return deadline, has
}

// receive reads and decodes one reply, which must answer the message
// responseTo, and returns its body. A reply with moreToCome is accepted only
// when exhaust is set (the request had exhaustAllowed, or the reply
// continues a stream); the connection then expects the next reply.
func (c *Conn) receive(ctx context.Context, deadline time.Time, has bool, responseTo int32, exhaust bool) (bson.Raw, error) {
	if c.poller != nil && !c.longPoll {
		c.poller.enter()
		defer c.poller.exit()
		if c.br.Buffered() == 0 && !c.sock.Pending() {
			c.pollSock.waitReply()
		}
	}
	raw, err := wire.ReadMessage(c.br, c.maxMessage)
	if err != nil {
		var we *sockio.WriteError
		if errors.As(err, &we) {
			return nil, c.ioError(ctx, "sending the command", we.Err)
		}
		return nil, c.ioError(ctx, "reading the reply", err)
	}
	var reply wire.Msg
	h, err := c.decodeReply(ctx, deadline, has, raw, &reply)
	if err != nil {
		if !errors.Is(err, wire.ErrProtocol) && !exhaust {
			// ctx ended the decompression: the reply was read whole, so
			// the stream is still in step.
			return nil, fmt.Errorf("reply from %s: %w", c.address, err)
		}
		return nil, c.fail(fmt.Errorf("reply from %s: %w", c.address, err))
	}
	if h.ResponseTo != responseTo {
		return nil, c.fail(fmt.Errorf("reply from %s answers request %d, not %d: %w", c.address, h.ResponseTo, responseTo, wire.ErrProtocol))
	}
	c.moreToCome = false
	if reply.Flags&wire.MoreToCome != 0 {
		if !exhaust {
			return nil, c.fail(fmt.Errorf("reply from %s has moreToCome set, but no exhaust was asked for: %w", c.address, wire.ErrProtocol))
		}
		if err := wire.CheckReply(reply.Body); err != nil {
			// The server must end a stream with an error reply; one that
			// says more follows leaves the stream's state unknown.
			return nil, c.fail(fmt.Errorf("reply from %s: moreToCome set on an error reply (%v): %w", c.address, err, wire.ErrProtocol))
		}
		c.moreToCome, c.lastReplyID = true, h.RequestID
	}
	return reply.Body, nil
}

// isGetMore reports whether cmd is a getMore, without allocating.
func isGetMore(cmd bson.Raw) bool {
	const name = "getMore"
	// The document's length, the first element's type, then its name.
	return len(cmd) > 5+len(name) && string(cmd[5:5+len(name)]) == name && cmd[5+len(name)] == 0
}

// sequencesSize returns the bytes seqs take in a message: per sequence,
// its kind byte, size and identifier, then its documents.
func sequencesSize(seqs []wire.Sequence) int {
	n := 0
	for _, s := range seqs {
		n += 1 + 4 + len(s.Identifier) + 1
		for _, d := range s.Documents {
			n += len(d)
		}
	}
	return n
}

// readBufferSize is a connection's read buffer: a small reply (and the
// header of any) comes in one read instead of two.
const readBufferSize = 4 << 10

// msgOverhead is what an OP_MSG adds to its body document: the header,
// flagBits and the section's kind byte.
const msgOverhead = wire.HeaderSize + 4 + 1

// decodeReply decodes raw into reply, decompressing it within ctx and, when the
// deadline comes from socketTimeoutMS rather than ctx, within that deadline
// too.
func (c *Conn) decodeReply(ctx context.Context, deadline time.Time, hasDeadline bool, raw []byte, reply *wire.Msg) (wire.Header, error) {
	if hasDeadline && len(raw) >= wire.HeaderSize && wire.OpCode(binary.LittleEndian.Uint32(raw[12:])) == wire.OpCompressed {
		if d, ok := ctx.Deadline(); !ok || deadline.Before(d) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	return wire.DecodeReplyInto(ctx, reply, raw, wire.DecodeOptions{MaxMessageSize: c.maxMessage, Compressors: c.accept})
}

// ioError breaks the connection with a network error, saying whether the
// context ended it.
func (c *Conn) ioError(ctx context.Context, doing string, err error) error {
	ctxErr := ctx.Err()
	if d, ok := ctx.Deadline(); ctxErr == nil && ok && !time.Now().Before(d) {
		ctxErr = context.DeadlineExceeded // the socket's deadline fired first
	}
	if ctxErr != nil {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return c.fail(fmt.Errorf("%s to %s: %w", doing, c.address, err))
}

// commandName returns the first key of a command document.
func commandName(cmd bson.Raw) string {
	elem, err := cmd.IndexErr(0)
	if err != nil {
		return ""
	}
	return elem.Key()
}
