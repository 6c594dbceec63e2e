package mongotest_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// rawConn is a bare wire-protocol client, built on the wire package, for
// what the driver never sends.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

// dialRaw opens a connection to srv, closed when the test ends.
func dialRaw(t *testing.T, srv *mongotest.Server) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// dialRawTLS opens a TLS connection to srv with cfg.
func dialRawTLS(t *testing.T, srv *mongotest.Server, cfg *tls.Config) *rawConn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", srv.Addr(), cfg)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// marshal encodes d.
func marshal(t *testing.T, d any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatalf("bson.Marshal: %v", err)
	}
	return b
}

// msg encodes m as an OP_MSG with request ID id.
func msg(t *testing.T, id int32, m *wire.Msg) []byte {
	t.Helper()
	b, err := wire.AppendMsg(nil, id, 0, m)
	if err != nil {
		t.Fatalf("AppendMsg: %v", err)
	}
	return b
}

// send writes raw bytes.
func (r *rawConn) send(b []byte) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// read reads one message.
func (r *rawConn) read() []byte {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := wire.ReadMessage(r.nc, 0)
	if err != nil {
		r.t.Fatalf("reading a reply: %v", err)
	}
	return b
}

// sendMsg sends the OP_MSG m, compressed with c unless c is nil, and
// returns its requestID.
func (r *rawConn) sendMsg(m *wire.Msg, c *wire.CompressorID) int32 {
	r.t.Helper()
	id := wire.NextRequestID()
	b := msg(r.t, id, m)
	if c != nil {
		var err error
		if b, err = wire.AppendCompressed(nil, b, *c, wire.ZlibDefaultLevel); err != nil {
			r.t.Fatalf("AppendCompressed: %v", err)
		}
	}
	r.send(b)
	return id
}

// roundTrip sends the OP_MSG m (compressed with c unless c is nil) and
// returns the reply as received, and its body, once it checked that the
// reply answers m.
func (r *rawConn) roundTrip(m *wire.Msg, c *wire.CompressorID) (raw []byte, body bson.Raw) {
	r.t.Helper()
	id := r.sendMsg(m, c)
	raw = r.read()
	h, reply, err := wire.DecodeReply(raw, 0)
	if err != nil {
		r.t.Fatalf("decoding the reply: %v", err)
	}
	if h.ResponseTo != id {
		r.t.Fatalf("reply responseTo %d, want %d", h.ResponseTo, id)
	}
	return raw, reply.Body
}

// run sends the command cmd (a bson.D with $db) and returns the reply.
func (r *rawConn) run(cmd bson.D) bson.Raw {
	r.t.Helper()
	_, reply := r.roundTrip(&wire.Msg{Body: marshal(r.t, cmd)}, nil)
	return reply
}

// cmd builds a command document: name: 1 (or value), the fields, $db.
func cmd(db string, fields ...bson.E) bson.D {
	return append(bson.D(fields), bson.E{Key: "$db", Value: db})
}

// expectClosed checks that the server closes the connection, without
// sending anything first.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.nc.Read(b[:])
	var ne net.Error
	switch {
	case n > 0:
		r.t.Fatalf("the server sent data instead of closing the connection")
	case errors.As(err, &ne) && ne.Timeout():
		r.t.Fatalf("the server did not close the connection")
	case err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err):
		r.t.Fatalf("read: %v; want the connection closed", err)
	}
}

// isReset reports a connection reset, which is how a close with unread
// input reaches the peer.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}

// opQuery builds an OP_QUERY on ns carrying query.
func opQuery(id int32, ns string, query bson.Raw) []byte {
	b := wire.AppendHeader(nil, wire.Header{RequestID: id, OpCode: 2004})
	b = binary.LittleEndian.AppendUint32(b, 0) // flags
	b = append(b, ns...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)          // numberToSkip
	b = binary.LittleEndian.AppendUint32(b, 0xFFFFFFFF) // numberToReturn -1
	b = append(b, query...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

// checkError checks that reply is a command error with code and codeName,
// and returns its errmsg.
func checkError(t *testing.T, reply bson.Raw, code int32, name string) string {
	t.Helper()
	var e struct {
		OK       float64 `bson:"ok"`
		ErrMsg   string  `bson:"errmsg"`
		Code     int32   `bson:"code"`
		CodeName string  `bson:"codeName"`
	}
	if err := bson.Unmarshal(reply, &e); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	if e.OK != 0 || e.Code != code || e.CodeName != name || e.ErrMsg == "" {
		t.Errorf("reply %s; want ok 0, code %d, codeName %s and an errmsg", reply, code, name)
	}
	return e.ErrMsg
}

// checkOK checks that reply has ok: 1.
func checkOK(t *testing.T, reply bson.Raw) {
	t.Helper()
	if err := wire.CheckReply(reply); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
}
