package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/internal/sockio"
	"github.com/mongopool/mongopool/wire"
)

// readBufferSize is a client connection's read buffer: small, since idle
// connections are what a proxy holds most of. A typical request (a find,
// an update by _id) comes whole in one read; a larger one is read past the
// buffer, straight into the request's own.
const readBufferSize = 1 << 10

// keepBuffer is the largest request or reply buffer a connection keeps
// between messages; a larger one, made for a large message, is dropped.
const keepBuffer = 64 << 10

// clientConn is one client connection: a goroutine that reads a request,
// serves it and writes its reply, one at a time.
type clientConn struct {
	p       *Proxy
	nc      net.Conn
	id      int64
	persona Persona
	br      *bufio.Reader
	// sock is nc as br reads it: the reply a request ends with is kept,
	// and written as the read of the next request begins (see sockio).
	// That read then waits for bytes that come after the reply, which a
	// client that waits for its replies sends. One that sends ahead
	// (pipelines) may have sent its next request already: that read
	// would wait for more. So it is bounded, by fusedBy, and then reads
	// as usual (see boundKeptReply).
	sock       *sockio.Conn
	deferReply bool                  // the request under way's reply may be kept
	fusedBy    time.Time             // the read deadline bounding the wait after a kept reply; zero when none is set
	pipelines  bool                  // the client sent ahead: its replies are written at once
	hdr        [wire.HeaderSize]byte // a request's header, as it is read
	rbuf       []byte                // the request, reused
	wbuf       []byte                // the reply's message, reused
	cbuf       []byte                // a compressed reply, reused
	dbuf       []byte                // a reply document the proxy builds, reused

	refuse       bool // beyond MaxClientConns: answer the first command with an error, then close
	handshaken   bool
	loadBalanced bool
	compressor   wire.CompressorID           // negotiated at the handshake
	app          atomic.Pointer[appCounters] // set at the handshake

	// up is the client whose pools serve the connection: the proxy's, or,
	// with authentication, that of the user's upstream credential (nil
	// until the client authenticates); identity is the user's "db.name".
	up *mongopool.Client
	// hangUp is set when the connection's upstream client was closed
	// under it (a reload removed it): the connection closes without a
	// reply, and its driver retries on a new one.
	hangUp   bool
	user     *User
	identity string
	sasl     *saslConv
	// lbTxns and lbCursors are, on a load balancer listener, the
	// transactions and cursors of the connection: when it closes, the
	// proxy aborts the former and kills the latter, as the services behind
	// a load balancer do (the load balancer specification).
	lbTxns    map[string]lbTxn
	lbCursors map[int64]struct{}
	// holdUse, when set, is the held upstream connection the next
	// exchange goes over (a load-balanced upstream's cursor or
	// transaction); with holdWant, the exchange checks one out and leaves
	// it in holdGot, for the caller to hold or give back (see holds.go).
	holdUse    *held
	holdWant   bool
	holdGot    *mongopool.Conn
	opened     time.Time
	operations atomic.Int64

	// ctx is the connection's, within the proxy's: it ends at Close and
	// when the connection ends. The waits and round trips of its
	// operations do not register with it, which would cost each a lock
	// and a map insertion: Close ends those under way itself (see
	// queueContext and startUpstream).
	ctx    context.Context
	cancel context.CancelFunc
	// qctx is the context of the attempt under way's wait for a
	// connection, remade for each (see queueContext).
	qctx queueContext
	// upCtx is ctx without its cancellation, for the upstream round trips:
	// Close interrupts the one under way by closing its connection (see
	// startUpstream).
	upCtx context.Context

	upMu     sync.Mutex       // protects following field
	upstream *connection.Conn // the upstream connection of the round trip under way

	writeBy time.Time // the socket's write deadline (see writeDeadline)

	busy atomic.Bool // from a request's first byte to its reply

	// replied is when the last reply was written, prompt whether the
	// request before came within the busy poll's budget of the reply
	// before it: a client that sends its requests back to back, whose
	// next request is worth polling for (see Config.BusyPoller).
	replied time.Time
	prompt  bool
	// polled is nc's socket as polledBy, the BusyPoller of the last
	// poll, polls it.
	polledBy *connection.BusyPoller
	polled   *connection.PolledSocket

	drainOnce sync.Once
	drainCh   chan struct{} // closed by drain
}

func newClientConn(p *Proxy, nc net.Conn, persona Persona) *clientConn {
	cc := &clientConn{
		p:       p,
		nc:      nc,
		id:      p.nextConnID.Add(1),
		persona: persona,
		sock:    sockio.New(nc),
		opened:  time.Now(),
		drainCh: make(chan struct{}),
	}
	cc.br = bufio.NewReaderSize(cc.sock, readBufferSize)
	cc.ctx, cc.cancel = context.WithCancel(p.ctx)
	cc.upCtx = context.WithoutCancel(cc.ctx)
	if !p.authRequired() {
		cc.up = p.client
	}
	return cc
}

// startUpstream records conn as the upstream connection of the round trip
// about to start, which Close interrupts; it fails once Close has begun.
//
// A context that Close cancels would interrupt the round trip too, but
// watching it costs each round trip a registration with it (two
// allocations, a lock and a map's insertion and deletion); Close, which
// happens once, does the work instead: it cancels ctx, then closes the
// connection recorded here, if any.
func (cc *clientConn) startUpstream(conn *connection.Conn) error {
	cc.upMu.Lock()
	defer cc.upMu.Unlock()
	if err := cc.ctx.Err(); err != nil {
		return err
	}
	cc.upstream = conn
	return nil
}

// endUpstream forgets the connection of the round trip that ended, before
// it goes back to its pool and to another client.
func (cc *clientConn) endUpstream() {
	cc.upMu.Lock()
	cc.upstream = nil
	cc.upMu.Unlock()
}

// interruptUpstream closes the connection of the round trip under way, if
// any: the round trip fails at once. Close calls it once ctx is canceled.
func (cc *clientConn) interruptUpstream() {
	cc.upMu.Lock()
	defer cc.upMu.Unlock()
	if cc.upstream != nil {
		cc.upstream.Close()
	}
}

// drain asks the connection to close once its operation under way, if
// any, is answered; an idle one is closed now (its read is interrupted).
func (cc *clientConn) drain() {
	cc.drainOnce.Do(func() {
		close(cc.drainCh)
		if !cc.busy.Load() {
			// Not at once: a request its client sent just before may be
			// in the socket, unread, and would be lost with the
			// connection (its client sees the connection close under
			// it). One that comes within drainGrace is served, then the
			// connection closes.
			cc.nc.SetReadDeadline(time.Now().Add(drainGrace))
		}
	})
}

// drainGrace is how long a draining idle connection waits for a request
// already on its way.
const drainGrace = 50 * time.Millisecond

func (cc *clientConn) draining() bool {
	select {
	case <-cc.drainCh:
		return true
	default:
		return false
	}
}

// serve runs the connection until the client hangs up, breaks the
// protocol, or the proxy closes or drains it.
func (cc *clientConn) serve() {
	defer cc.cancel()
	defer cc.nc.Close()
	defer cc.sock.Flush() // a reply kept, before the connection closes
	defer func() {
		// A bug in serving one client must not take every other down
		// with the process: it ends this connection, loudly.
		if r := recover(); r != nil {
			cc.p.log.Error("proxy: a client connection's goroutine panicked; closing the connection", "conn", cc.id,
				"remote", cc.nc.RemoteAddr().String(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	defer cc.releaseLB()
	first := true
	graced := false
	for {
		if cc.draining() {
			if graced {
				return
			}
			// A request its client sent before the drain began, on the
			// reply written just before, is served too (see drain).
			graced = true
			cc.nc.SetReadDeadline(time.Now().Add(drainGrace))
		}
		bp := cc.p.cfg.Load().BusyPoller
		if cc.prompt && cc.br.Buffered() == 0 {
			if cc.polledBy != bp { // the first poll, or a Reconfigure gave another
				cc.polledBy, cc.polled = bp, bp.Socket(cc.nc)
			}
			if cc.polled.WouldPoll() {
				// The poll waits for the next request: the reply goes
				// first.
				if cc.sock.Flush() != nil {
					return
				}
				cc.polled.Wait()
			}
		}
		if cc.sock.Pending() {
			cc.boundKeptReply()
		}
		msg, err := cc.readMessage()
		if bp != nil {
			cc.prompt = !cc.replied.IsZero() && time.Since(cc.replied) < bp.Budget()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !cc.draining() {
				cc.p.log.Debug("proxy: client connection ended", "conn", cc.id, "remote", cc.nc.RemoteAddr().String(), "error", err)
			}
			return
		}
		if first {
			// The first command came in time: from now on, an idle
			// client may stay.
			first = false
			cc.nc.SetReadDeadline(time.Time{})
		}
		if cc.br.Buffered() > 0 && !cc.pipelines {
			// The next request came with this one: the client sends
			// ahead of its replies.
			cc.sendsAhead()
		}
		cc.deferReply = !cc.pipelines
		ok := cc.handle(msg)
		cc.deferReply = false
		if !ok {
			return
		}
		if bp != nil {
			cc.replied = time.Now()
		}
		cc.busy.Store(false)
		if cap(cc.rbuf) > keepBuffer {
			cc.rbuf = nil
		}
	}
}

// keptReplyWait bounds how long the read that wrote a kept reply waits for
// bytes that come after it, before it reads as usual: the longest a request
// its client sent ahead of the reply waits (once: that client's replies are
// then written at once). Drivers do not send ahead, so it is long enough
// that the deadline moves seldom: every 125ms, where a thousand clients
// each send a request every 30ms or so (at 50ms, it moved at every
// request, a timer's update each).
const keptReplyWait = 250 * time.Millisecond

// boundKeptReply bounds the read about to write a kept reply by
// keptReplyWait, or writes the reply now when the connection drains (its
// read has its own bound). The deadline moves only once half of it is gone,
// not at every request (each move is the runtime's timer work).
func (cc *clientConn) boundKeptReply() {
	if cc.draining() {
		cc.sock.Flush() // an error comes again at the read
		return
	}
	now := time.Now()
	if cc.fusedBy.Sub(now) < keptReplyWait/2 {
		cc.fusedBy = now.Add(keptReplyWait)
		cc.nc.SetReadDeadline(cc.fusedBy)
	}
}

// unboundKeptReply clears the bound boundKeptReply set, if any, and tells
// whether there was one. The drain's bound is set again after the clear:
// drain sets it after closing drainCh, so one of the two sets it last.
func (cc *clientConn) unboundKeptReply() bool {
	if cc.fusedBy.IsZero() {
		return false
	}
	cc.fusedBy = time.Time{}
	cc.nc.SetReadDeadline(time.Time{})
	if cc.draining() {
		cc.nc.SetReadDeadline(time.Now().Add(drainGrace))
	}
	return true
}

// readFull is io.ReadFull on br, past the bound of kept replies' reads: one
// that reaches it clears it and reads on. When bytes were waiting then,
// the client sent them before its reply came, and its wait saw them not:
// it pipelines, and its replies are written at once from now on.
func (cc *clientConn) readFull(p []byte) (int, error) {
	n, err := io.ReadFull(cc.br, p)
	for err != nil && errors.Is(err, os.ErrDeadlineExceeded) && cc.unboundKeptReply() {
		if !cc.pipelines && cc.sock.Readable() {
			cc.sendsAhead()
		}
		var m int
		m, err = io.ReadFull(cc.br, p[n:])
		n += m
	}
	return n, err
}

// sendsAhead marks the client as one that sends requests ahead of its
// replies: they are written at once from now on.
func (cc *clientConn) sendsAhead() {
	cc.pipelines = true
	cc.p.stats.sendingAhead.Add(1)
}

// readMessage reads one message whole into cc.rbuf. The declared length is
// checked before anything is allocated, and the buffer grows only as bytes
// arrive, so a client that claims a large message and sends little costs
// little.
func (cc *clientConn) readMessage() ([]byte, error) {
	hdr := cc.hdr[:]
	if _, err := cc.readFull(hdr[:1]); err != nil {
		return nil, err
	}
	cc.busy.Store(true)
	if _, err := cc.readFull(hdr[1:]); err != nil {
		return nil, fmt.Errorf("reading a message header: %w", err)
	}
	length := int32(binary.LittleEndian.Uint32(hdr[:]))
	if length < wire.HeaderSize || length > maxMessageSize {
		return nil, fmt.Errorf("a message declares %d bytes, outside [%d, %d]: closing the connection", length, wire.HeaderSize, maxMessageSize)
	}
	buf := append(cc.rbuf[:0], hdr...)
	for len(buf) < int(length) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*cap(buf), 4096), int(length)))
			copy(grown, buf)
			buf = grown
		}
		n, err := cc.readFull(buf[len(buf):min(cap(buf), int(length))])
		buf = buf[:len(buf)+n]
		if err != nil {
			return nil, fmt.Errorf("a message was cut after %d of its %d bytes: %w", len(buf), length, err)
		}
	}
	cc.rbuf = buf
	return buf, nil
}

// handle serves one message, and reports whether the connection goes on.
func (cc *clientConn) handle(msg []byte) bool {
	h, _ := wire.ParseHeader(msg)
	switch h.OpCode {
	case wire.OpMsg:
		return cc.handleMsg(h, msg, 0)
	case wire.OpCompressed:
		if len(msg) < wire.HeaderSize+9 {
			cc.p.log.Debug("proxy: a compressed message is too short", "conn", cc.id)
			return false
		}
		comp := wire.CompressorID(msg[wire.HeaderSize+8])
		inner, err := wire.DecompressContext(cc.ctx, msg, wire.DecodeOptions{MaxMessageSize: maxMessageSize, Compressors: cc.p.offer})
		if err != nil {
			cc.p.log.Debug("proxy: a compressed message could not be decompressed", "conn", cc.id, "error", err)
			return false
		}
		ih, _ := wire.ParseHeader(inner)
		switch ih.OpCode {
		case wire.OpMsg:
			return cc.handleMsg(ih, inner, comp)
		case opQuery:
			return cc.handleQuery(ih, inner)
		}
		cc.p.log.Debug("proxy: unsupported opcode in a compressed message", "conn", cc.id, "opcode", int32(ih.OpCode))
		return false
	case opQuery:
		return cc.handleQuery(h, msg)
	}
	cc.p.log.Debug("proxy: unsupported opcode", "conn", cc.id, "opcode", int32(h.OpCode))
	return false
}

// handleMsg serves an OP_MSG; comp is the compressor it came with.
func (cc *clientConn) handleMsg(h wire.Header, msg []byte, comp wire.CompressorID) bool {
	p := cc.p
	var m wire.Msg
	if _, err := wire.DecodeMsgInto(&m, msg); err != nil {
		// An OP_MSG that cannot be decoded leaves nothing to answer.
		p.log.Debug("proxy: an invalid OP_MSG", "conn", cc.id, "error", err)
		return false
	}
	ex := exchangeOf{responseTo: h.RequestID, comp: comp, moreToCome: m.Flags&wire.MoreToCome != 0,
		exhaust: m.Flags&wire.ExhaustAllowed != 0, received: time.Now()}
	req, err := parseRequest(m.Body)
	if err != nil {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeFailedToParse, "proxy: "+err.Error()))
	}
	if cc.refuse {
		p.stats.local.Add(1)
		p.stats.overloaded.Add(1)
		cc.reply(ex, errorReply(cc.dbuf, codeOverloaded, fmt.Sprintf("proxy: too many client connections (the most is %d); retry later", p.conf().MaxClientConns), labelSystemOverloaded, labelRetryable))
		return false
	}
	switch req.name {
	case "hello", "isMaster", "ismaster":
		p.stats.local.Add(1)
		return cc.hello(ex, m.Body, req.name != "hello", false)
	case "ping":
		p.stats.local.Add(1)
		return cc.reply(ex, okReply)
	case "saslStart", "saslContinue", "authenticate":
		p.stats.local.Add(1)
		if !p.authRequired() {
			return cc.reply(ex, errorReply(cc.dbuf, codeAuthenticationFailed, "proxy: this proxy authenticates no client (it connects to the servers with its own credentials): remove the credentials from the client's connection string"))
		}
		return cc.authCommand(ex, &req)
	case "logout", "getnonce":
		p.stats.local.Add(1)
		return cc.reply(ex, okReply)
	}
	if cc.up == nil && !preAuthCommands[req.name] {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeUnauthorized, fmt.Sprintf("command %s requires authentication", req.name)))
	}
	switch req.name {
	case "endSessions":
		if cc.up == nil {
			p.stats.local.Add(1)
			return cc.reply(ex, okReply) // nothing of an unauthenticated client's to end
		}
	case "buildInfo", "buildinfo":
		if cc.up == nil {
			// Shells ask before they authenticate: the proxy's own
			// client answers for the deployment.
			cc.up = p.client
			defer func() { cc.up = nil }()
		}
	case "proxyStatus":
		p.stats.local.Add(1)
		return cc.proxyStatus(ex, m.Body)
	case "proxyPause", "proxyResume", "proxyReconnect":
		p.stats.local.Add(1)
		return cc.pauseCommand(ex, req.name, m.Body)
	case "getMore":
		return cc.getMore(ex, &req, m.Sequences)
	case "killCursors":
		return cc.killCursors(ex, &req)
	}
	return cc.command(ex, &req, m.Sequences)
}

// exchangeOf is what a request's reply depends on.
type exchangeOf struct {
	responseTo int32
	comp       wire.CompressorID // the request's compressor: the reply's
	moreToCome bool              // the client wants no reply
	exhaust    bool              // exhaustAllowed
	received   time.Time
	longPoll   bool // an awaitData getMore: its time is not an operation's latency
}

// reply writes body as the reply to the request of ex, compressed as the
// request was; nothing for a request with moreToCome. It reports whether
// the connection goes on.
func (cc *clientConn) reply(ex exchangeOf, body bson.Raw) bool {
	if cc.hangUp {
		return false
	}
	if a := cc.app.Load(); a != nil && replyCode(body) != 0 {
		a.errors.Add(1)
	}
	if ex.moreToCome {
		return true
	}
	_, ok := cc.writeMsg(ex, 0, body)
	return ok
}

// writeDeadline gives the next write WriteTimeout at least, and at most
// half as much again: the socket's deadline moves only once half of it is
// gone, not at every reply (each move is the runtime's timer work).
func (cc *clientConn) writeDeadline() {
	now := time.Now()
	timeout := cc.p.conf().WriteTimeout
	if cc.writeBy.Sub(now) < timeout {
		cc.writeBy = now.Add(timeout + timeout/2)
		cc.nc.SetWriteDeadline(cc.writeBy)
	}
}

// writeMsg writes body in an OP_MSG with flags, and returns its requestID.
func (cc *clientConn) writeMsg(ex exchangeOf, flags wire.Flag, body bson.Raw) (int32, bool) {
	// A reply kept is in wbuf or cbuf: it goes before they are reused.
	if cc.sock.Flush() != nil {
		return 0, false
	}
	requestID := wire.NextRequestID()
	out, err := wire.AppendMsg(cc.wbuf[:0], requestID, ex.responseTo, &wire.Msg{Flags: flags, Body: body})
	if err != nil {
		cc.p.log.Warn("proxy: a reply could not be encoded", "conn", cc.id, "error", err)
		return 0, false
	}
	cc.wbuf = out
	if ex.comp != wire.CompressorNoop {
		comp, err := wire.AppendCompressed(cc.cbuf[:0], out, ex.comp, wire.ZlibDefaultLevel)
		if err == nil {
			cc.cbuf, out = comp, comp
		}
	}
	cc.writeDeadline()
	if cc.deferReply && flags == 0 && !cc.p.conf().BusyPoller.WouldPoll() {
		// The request's one reply: the read of the next request writes
		// it (a reply with moreToCome has more after it, and waits). Not
		// while the busy poller polls (at low load): whether the next
		// request comes within its budget is timed from the reply's
		// write, which must then not wait for the next read.
		cc.deferReply = false
		err = cc.sock.Defer(out)
	} else {
		_, err = cc.nc.Write(out)
	}
	if cap(cc.wbuf) > keepBuffer {
		cc.wbuf = nil
	}
	if cap(cc.cbuf) > keepBuffer {
		cc.cbuf = nil
	}
	if err != nil {
		cc.p.log.Debug("proxy: writing a reply failed", "conn", cc.id, "error", err)
		return 0, false
	}
	return requestID, true
}

// hello answers a handshake or a monitoring check: legacy for isMaster and
// ismaster, opQuery when it came over OP_QUERY. An awaitable hello (with
// the proxy's current topologyVersion and maxAwaitTimeMS) waits for a
// change, up to maxAwaitTimeMS; with exhaustAllowed, the proxy then goes on
// streaming replies every maxAwaitTimeMS (the streaming protocol), until
// the client hangs up or the proxy drains.
func (cc *clientConn) hello(ex exchangeOf, body bson.Raw, legacy, opQuery bool) bool {
	p := cc.p
	h := parseHello(body, legacy)
	if !cc.handshaken {
		cc.handshaken = true
		for _, name := range h.compression {
			if id, ok := wire.ParseCompressor(name); ok && id != wire.CompressorNoop && offers(p.offer, id) {
				cc.compressor = id
				break
			}
		}
		if h.loadBalanced {
			if cc.persona != LoadBalancer {
				return cc.answer(ex, opQuery, errorReply(cc.dbuf, codeInvalidOptions, "proxy: this listener presents a mongos, not a load balancer: connect without loadBalanced=true, or to the proxy's load balancer listener"))
			}
			cc.loadBalanced = true
		}
		a := p.app(h.appName)
		a.conns.Add(1)
		a.accepted.Add(1)
		cc.app.Store(a)
	} else if h.hasClient {
		return cc.answer(ex, opQuery, errorReply(cc.dbuf, codeClientMetadataCannotBeMutated, "The client metadata document may only be sent in the first hello"))
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.conf().QueueTimeout)
	st, err := p.helloNow(ctx)
	cancel()
	if err != nil {
		return cc.answer(ex, opQuery, errorReply(cc.dbuf, codeHostUnreachable, "proxy: "+err.Error()))
	}
	var spec bson.Raw
	if h.speculative != nil && p.authRequired() {
		spec = cc.speculate(h.speculative)
	}
	awaitable := h.hasTV && h.hasMaxAwait && !opQuery
	if awaitable && h.tvProcess == p.processID && h.tvCounter == st.counter {
		if st, err = cc.awaitChange(st, h.maxAwait, nil); err != nil {
			return false
		}
	}
	if !awaitable || !ex.exhaust || ex.moreToCome {
		return cc.answer(ex, opQuery, cc.appendHello(cc.dbuf[:0], h, st, spec))
	}
	// The streaming protocol: a reply with moreToCome, then another each
	// maxAwaitTimeMS or at a change, each answering the one before, until
	// the client hangs up. The client sends nothing meanwhile: a read
	// that returns is its hang-up (or a breach of the protocol), which
	// ends the stream at once rather than at the next reply.
	// Its reads have no bound: it waits as long as the client stays.
	cc.unboundKeptReply()
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		cc.br.Read(b[:])
		close(gone)
	}()
	for {
		cc.dbuf = cc.appendHello(cc.dbuf[:0], h, st, nil)
		id, ok := cc.writeMsg(ex, wire.MoreToCome, cc.dbuf)
		if !ok {
			return false
		}
		ex.responseTo = id
		if st, err = cc.awaitChange(st, h.maxAwait, gone); err != nil {
			return false
		}
	}
}

// awaitChange waits up to d for the hello state to change from st, and
// returns the state then; an error when the proxy closes or drains, or
// gone is closed.
func (cc *clientConn) awaitChange(st *helloState, d time.Duration, gone <-chan struct{}) (*helloState, error) {
	p := cc.p
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.personaChanged():
	case <-cc.drainCh:
		return nil, ErrClosed
	case <-p.ctx.Done():
		return nil, ErrClosed
	case <-gone:
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.conf().QueueTimeout)
	defer cancel()
	if now, err := p.helloNow(ctx); err == nil {
		return now, nil
	}
	return st, nil
}

func offers(list []wire.CompressorID, id wire.CompressorID) bool {
	for _, c := range list {
		if c == id {
			return true
		}
	}
	return false
}

// answer replies in the opcode the request came in.
func (cc *clientConn) answer(ex exchangeOf, opQuery bool, body bson.Raw) bool {
	cc.dbuf = body[:0]
	if opQuery {
		return cc.writeReply(ex.responseTo, 0, body)
	}
	return cc.reply(ex, body)
}

// The legacy opcodes the proxy knows: OP_QUERY for the legacy hello only,
// answered with an OP_REPLY.
const (
	opQuery wire.OpCode = 2004
	opReply wire.OpCode = 1
)

// queryFailure is OP_REPLY's QueryFailure flag.
const queryFailure = 1 << 1

// handleQuery serves an OP_QUERY: a legacy hello on a "<db>.$cmd"
// namespace, which drivers send first; anything else gets the error that
// current servers give.
func (cc *clientConn) handleQuery(h wire.Header, msg []byte) bool {
	cc.p.stats.local.Add(1)
	ns, cmd, ok := parseOpQuery(msg)
	if !ok {
		cc.p.log.Debug("proxy: an invalid OP_QUERY", "conn", cc.id)
		return false
	}
	ex := exchangeOf{responseTo: h.RequestID, received: time.Now()}
	name := ""
	if e, err := cmd.IndexErr(0); err == nil {
		name = e.Key()
	}
	if len(ns) > 5 && ns[len(ns)-5:] == ".$cmd" && (name == "isMaster" || name == "ismaster" || name == "hello") {
		return cc.hello(ex, cmd, name != "hello", true)
	}
	return cc.writeReply(h.RequestID, queryFailure, errorReply(cc.dbuf, codeUnsupportedOpQuery,
		fmt.Sprintf("Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal", name)))
}

// parseOpQuery reads an OP_QUERY (header included): its namespace and its
// query document (unwrapped from $query). ok is false for bytes that do
// not form one.
func parseOpQuery(msg []byte) (ns string, cmd bson.Raw, ok bool) {
	if len(msg) < wire.HeaderSize+4 {
		return "", nil, false
	}
	body := msg[wire.HeaderSize+4:] // past the header and the flags
	end := bytes.IndexByte(body, 0)
	if end < 0 || len(body) < end+1+8+5 {
		return "", nil, false
	}
	doc, _, ok := bsoncore.ReadDocument(body[end+1+8:])
	if !ok || doc.Validate() != nil {
		return "", nil, false
	}
	cmd = bson.Raw(doc)
	if q, err := cmd.LookupErr("$query"); err == nil {
		if d, ok := q.DocumentOK(); ok {
			cmd = d
		}
	}
	return string(body[:end]), cmd, true
}

// writeReply writes doc in an OP_REPLY answering responseTo.
func (cc *clientConn) writeReply(responseTo int32, flags int32, doc bson.Raw) bool {
	if cc.sock.Flush() != nil {
		return false
	}
	out := cc.wbuf[:0]
	out = wire.AppendHeader(out, wire.Header{MessageLength: int32(wire.HeaderSize + 20 + len(doc)), RequestID: wire.NextRequestID(), ResponseTo: responseTo, OpCode: opReply})
	out = binary.LittleEndian.AppendUint32(out, uint32(flags))
	out = binary.LittleEndian.AppendUint64(out, 0) // cursorID
	out = binary.LittleEndian.AppendUint32(out, 0) // startingFrom
	out = binary.LittleEndian.AppendUint32(out, 1) // numberReturned
	out = append(out, doc...)
	cc.wbuf = out
	cc.writeDeadline()
	if _, err := cc.nc.Write(out); err != nil {
		return false
	}
	return true
}
