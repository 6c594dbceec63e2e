package mongotest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// conn is one client connection and its state. Only the connection's own
// goroutine touches its fields, but for nc, which Close may close.
type conn struct {
	srv  *Server
	nc   net.Conn
	id   int32 // the connectionId hello reports
	life *life // the server's life the connection belongs to

	// pending are bytes the client sent while the server watched for its
	// hanging up (see awaitChange), which the next read returns first.
	pending []byte

	// user is the user the connection authenticated as, nil before.
	user *userKey
	// sasl is the SASL conversation in progress, if any.
	sasl *saslConv
	// peer is the verified client certificate of a TLS connection, if any.
	peer *x509.Certificate
	// appName is the client.application.name of the first hello that
	// carried client metadata, which the failCommand fail point matches;
	// hasMetadata is set once such a hello came.
	appName     string
	hasMetadata bool
}

// noCompressor marks a request that arrived uncompressed.
const noCompressor = -1

// serve reads and answers messages until the peer hangs up, the server
// closes the connection, or the peer breaks the protocol.
func (c *conn) serve() {
	defer c.nc.Close()
	if !c.srv.reachable(c.life.done) {
		return
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.HandshakeContext(context.Background()); err != nil {
			return
		}
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
			c.peer = st.PeerCertificates[0]
		}
	}
	for {
		msg, err := wire.ReadMessage(c, MaxMessageSize)
		if err == nil && !c.srv.reachable(c.life.done) {
			return // a partition held the request until the server stopped
		}
		if err == nil {
			err = c.handle(msg)
		}
		if err != nil {
			if errors.Is(err, wire.ErrProtocol) {
				c.srv.stats.protocolError()
			}
			return
		}
	}
}

// handle decodes one message, runs the command it carries and writes the
// reply. An error means the connection must be closed.
func (c *conn) handle(msg []byte) error {
	h, err := wire.ParseHeader(msg)
	if err != nil {
		return err
	}
	compressor := noCompressor
	if h.OpCode == wire.OpCompressed {
		plain, err := wire.Decompress(msg, MaxMessageSize)
		if err != nil {
			return err
		}
		// Decompress checked that msg holds the compressorId byte.
		id := wire.CompressorID(msg[wire.HeaderSize+8])
		if !c.srv.acceptsCompressor(id) {
			return fmt.Errorf("%w: mongotest: message compressed with %v, which the server does not accept", wire.ErrProtocol, id)
		}
		c.srv.stats.compressedReceived(id)
		compressor = int(id)
		msg = plain
		if h, err = wire.ParseHeader(msg); err != nil {
			return err
		}
	}
	return c.handleDecoded(h, msg, compressor)
}

// handleDecoded runs the uncompressed message msg, which arrived compressed
// with compressor (or noCompressor).
func (c *conn) handleDecoded(h wire.Header, msg []byte, compressor int) error {
	switch h.OpCode {
	case wire.OpMsg:
		_, m, err := wire.DecodeMsg(msg)
		if err != nil {
			return err
		}
		req := &request{conn: c, body: m.Body, seqs: m.Sequences, flags: m.Flags, compressor: compressor}
		req.name, req.db = commandName(m.Body), dbOf(m.Body)
		responseTo := h.RequestID
		for {
			reply, err := c.srv.dispatch(req)
			if err != nil {
				return err // close without a reply
			}
			if m.Flags&wire.MoreToCome != 0 {
				// The client wants no reply. mongod closes the connection
				// when such a write meets a member that is not primary,
				// since the client would never learn of it otherwise.
				if code, _ := reply.Lookup("code").AsInt64OK(); notPrimaryCodes[int32(code)] {
					return errNotPrimaryUnacknowledged
				}
				return nil
			}
			// An exhaust hello (see Server.hello) streams its replies with
			// moreToCome, each answering the previous one, until one is
			// an error or the connection ends.
			var flags wire.Flag
			if req.next != nil {
				flags = wire.MoreToCome
				c.srv.stats.exhaustReply()
			}
			id := wire.NextRequestID()
			out, err := wire.AppendMsg(nil, id, responseTo, &wire.Msg{Flags: flags, Body: reply})
			if err != nil {
				return fmt.Errorf("mongotest: encoding the reply to %s: %w", req.name, err)
			}
			if err := c.write(out, req.name, compressor); err != nil || req.next == nil {
				return err
			}
			responseTo = id
			req = &request{conn: c, body: req.next, flags: m.Flags, compressor: compressor, name: req.name, db: req.db}
		}
	case opQuery:
		q, err := decodeQuery(msg)
		if err != nil {
			return err
		}
		c.srv.stats.opQuery()
		var reply bson.Raw
		if q.ns != "" {
			reply = errorReply(errorf(codeUnsupportedOpQueryCommand,
				"Unsupported OP_QUERY on namespace %q: OP_QUERY is only supported for the hello command", q.ns), nil)
		} else {
			req := &request{conn: c, body: q.command, db: q.db, legacy: true, compressor: compressor}
			req.name = commandName(q.command)
			if reply, err = c.srv.dispatch(req); err != nil {
				return err // close without a reply
			}
		}
		return c.write(appendReply(nil, wire.NextRequestID(), h.RequestID, reply), commandName(q.command), compressor)
	}
	return fmt.Errorf("%w: mongotest: unsupported %v", wire.ErrProtocol, h.OpCode)
}

// write sends the reply msg to the command name, compressed with the
// compressor of the request when the command allows it, or as an injected
// fault says (see InjectFault).
func (c *conn) write(msg []byte, name string, compressor int) error {
	if !c.srv.reachable(c.life.done) {
		return errServerStopped // the server stopped during a partition
	}
	if f, ok := c.srv.faults.take(false, name); ok {
		return c.writeFaulty(f, msg, name, compressor)
	}
	out, err := c.encodeReply(msg, name, compressor)
	if err != nil {
		return err
	}
	return wire.WriteMessage(c.nc, out)
}

// commandName returns the first key of a command document, "" if empty.
func commandName(body bson.Raw) string {
	e, err := body.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

// dbOf returns the command's $db, "" if it has none or not a string.
func dbOf(body bson.Raw) string {
	db, _ := body.Lookup("$db").StringValueOK()
	return db
}

// encodeReply returns the reply msg to the command name as it goes on the
// wire: compressed with the compressor of the request when the command
// allows it, as is otherwise.
func (c *conn) encodeReply(msg []byte, name string, compressor int) ([]byte, error) {
	if compressor == noCompressor || !wire.Compressible(name) {
		return msg, nil
	}
	id := wire.CompressorID(compressor)
	out, err := wire.AppendCompressed(nil, msg, id, wire.ZlibDefaultLevel)
	if err != nil {
		return nil, fmt.Errorf("mongotest: compressing the reply to %s: %w", name, err)
	}
	c.srv.stats.compressedSent(id)
	return out, nil
}

// errNotPrimaryUnacknowledged closes a connection on which an
// unacknowledged write met a member that is not primary.
var errNotPrimaryUnacknowledged = errors.New("mongotest: an unacknowledged write on a member that is not primary")

// errServerStopped ends the serving of a connection whose server stopped.
var errServerStopped = errors.New("mongotest: the server stopped")

// Read reads what the client sent: the bytes kept while watching for its
// hanging up first, then the connection's.
func (c *conn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.nc.Read(p)
}

// hangUpWatch reads the connection while the server waits for something
// else, as mongod checks for a client that went away while an operation
// waits: stop ends the watch, and reports whether the client hung up.
// The bytes read meanwhile (a client must send none before the reply, but
// may) are kept for the next read.
type hangUpWatch struct {
	c    *conn
	gone chan struct{} // closed when the client hangs up
	done chan struct{} // closed when the reading goroutine ends
	buf  []byte
}

// watchHangUp starts watching c.
func (c *conn) watchHangUp() *hangUpWatch {
	w := &hangUpWatch{c: c, gone: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var b [512]byte
		n, err := c.nc.Read(b[:])
		w.buf = append(w.buf, b[:n]...)
		var ne net.Error
		if n == 0 && err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			close(w.gone)
		}
	}()
	return w
}

// stop ends the watch and reports whether the client hung up. The
// connection may be read again afterwards.
func (w *hangUpWatch) stop() (hungUp bool) {
	w.c.nc.SetReadDeadline(time.Unix(1, 0)) // ends the Read at once
	<-w.done
	w.c.nc.SetReadDeadline(time.Time{})
	w.c.pending = append(w.c.pending, w.buf...)
	select {
	case <-w.gone:
		return true
	default:
		return false
	}
}
