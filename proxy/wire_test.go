package proxy_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// rawConn is a client connection that speaks the wire protocol by hand.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc}
}

func mustMarshal(t testing.TB, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send writes cmd in an OP_MSG with flags, compressed with comp unless
// it is the noop, and returns the request id.
func (c *rawConn) send(cmd bson.Raw, flags wire.Flag, comp wire.CompressorID) int32 {
	c.t.Helper()
	id := wire.NextRequestID()
	msg, err := wire.AppendMsg(nil, id, 0, &wire.Msg{Flags: flags, Body: cmd})
	if err != nil {
		c.t.Fatal(err)
	}
	if comp != wire.CompressorNoop {
		if msg, err = wire.AppendCompressed(nil, msg, comp, 0); err != nil {
			c.t.Fatal(err)
		}
	}
	if _, err := c.nc.Write(msg); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// read reads one message and returns its header, its OP_MSG flags and
// body (decompressed), failing the test on anything else.
func (c *rawConn) read() (wire.Header, wire.Flag, bson.Raw, bool) {
	c.t.Helper()
	raw, err := wire.ReadMessage(c.nc, 0)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	compressed := false
	if h, _ := wire.ParseHeader(raw); h.OpCode == wire.OpCompressed {
		compressed = true
		if raw, err = wire.Decompress(raw, 0); err != nil {
			c.t.Fatal(err)
		}
	}
	h, m, err := wire.DecodeMsg(raw)
	if err != nil {
		c.t.Fatalf("decoding a reply: %v", err)
	}
	return h, m.Flags, m.Body, compressed
}

// roundTrip sends cmd and returns the reply's body.
func (c *rawConn) roundTrip(cmd bson.Raw) bson.Raw {
	c.t.Helper()
	id := c.send(cmd, 0, 0)
	h, _, body, _ := c.read()
	if h.ResponseTo != id {
		c.t.Fatalf("the reply answers %d, not %d", h.ResponseTo, id)
	}
	return body
}

// opQuery sends cmd as an OP_QUERY on ns and returns the OP_REPLY's flags
// and document.
func (c *rawConn) opQuery(ns string, cmd bson.Raw) (int32, bson.Raw) {
	c.t.Helper()
	id := wire.NextRequestID()
	body := binary.LittleEndian.AppendUint32(nil, 0)
	body = append(append(body, ns...), 0)
	body = binary.LittleEndian.AppendUint32(body, 0)
	body = binary.LittleEndian.AppendUint32(body, 0xffffffff)
	body = append(body, cmd...)
	msg := wire.AppendHeader(nil, wire.Header{MessageLength: int32(wire.HeaderSize + len(body)), RequestID: id, OpCode: 2004})
	msg = append(msg, body...)
	if _, err := c.nc.Write(msg); err != nil {
		c.t.Fatal(err)
	}
	raw, err := wire.ReadMessage(c.nc, 0)
	if err != nil {
		c.t.Fatalf("reading the OP_REPLY: %v", err)
	}
	h, _ := wire.ParseHeader(raw)
	if h.OpCode != 1 || h.ResponseTo != id {
		c.t.Fatalf("got opcode %d answering %d, want an OP_REPLY (1) answering %d", h.OpCode, h.ResponseTo, id)
	}
	flags := int32(binary.LittleEndian.Uint32(raw[16:]))
	if n := binary.LittleEndian.Uint32(raw[32:]); n != 1 {
		c.t.Fatalf("the OP_REPLY has %d documents, want 1", n)
	}
	doc, _, ok := bsoncore.ReadDocument(raw[36:])
	if !ok {
		c.t.Fatal("the OP_REPLY's document is not valid")
	}
	return flags, bson.Raw(doc)
}

func TestHandshakeSpellingsAnsweredInTheirOpcode(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})

	for _, name := range []string{"isMaster", "ismaster"} {
		c := dialRaw(t, addr)
		flags, doc := c.opQuery("admin.$cmd", mustMarshal(t, bson.D{{Key: name, Value: true}, {Key: "helloOk", Value: true}}))
		if flags != 0 {
			t.Fatalf("%s over OP_QUERY: reply flags %d", name, flags)
		}
		checkMongosHello(t, doc, true)
	}
	c := dialRaw(t, addr)
	for i, name := range []string{"hello", "isMaster", "ismaster"} {
		body := c.roundTrip(mustMarshal(t, bson.D{{Key: name, Value: 1}, {Key: "$db", Value: "admin"}}))
		checkMongosHello(t, body, name != "hello")
		if i == 0 {
			if _, ok := body.Lookup("helloOk").BooleanOK(); !ok {
				t.Fatalf("hello's reply has no helloOk: %v", body)
			}
		}
	}
	// Another OP_QUERY command is refused as current servers refuse it.
	flags, doc := c.opQuery("db.$cmd", mustMarshal(t, bson.D{{Key: "find", Value: "x"}}))
	if flags&2 == 0 || doc.Lookup("code").Int32() != 352 {
		t.Fatalf("find over OP_QUERY: flags %d, %v; want QueryFailure and code 352", flags, doc)
	}
	// A second handshake with client metadata is refused, as mongod does.
	body := c.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{{Key: "driver", Value: bson.D{{Key: "name", Value: "x"}}}}}, {Key: "$db", Value: "admin"}}))
	if body.Lookup("code").Int32() != 186 {
		t.Fatalf("a second client metadata document: %v, want code 186", body)
	}
	// No handshake went upstream.
	if st := p.Stats(); st.Operations != 0 || st.Local != 7 {
		t.Fatalf("the proxy relayed %d commands and answered %d itself; want 0 and 7", st.Operations, st.Local)
	}
}

// checkMongosHello checks a hello reply presents a mongos with the
// upstream's wire versions.
func checkMongosHello(t *testing.T, doc bson.Raw, legacy bool) {
	t.Helper()
	if s, _ := doc.Lookup("msg").StringValueOK(); s != "isdbgrid" {
		t.Fatalf("hello's msg = %q, want isdbgrid: %v", s, doc)
	}
	key := "isWritablePrimary"
	if legacy {
		key = "ismaster"
	}
	if b, ok := doc.Lookup(key).BooleanOK(); !ok || !b {
		t.Fatalf("hello has no %s: true: %v", key, doc)
	}
	maxWire, ok := doc.Lookup("maxWireVersion").Int32OK()
	if !ok || maxWire < 9 {
		t.Fatalf("maxWireVersion = %v, want the upstream's (>= 9): %v", maxWire, doc)
	}
	for _, f := range []string{"topologyVersion", "logicalSessionTimeoutMinutes", "maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize", "connectionId", "minWireVersion"} {
		if _, err := doc.LookupErr(f); err != nil {
			t.Fatalf("hello has no %s: %v", f, doc)
		}
	}
}

func TestCompressionNegotiatedWithTheClient(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{Compressors: []string{"zstd", "zlib"}})
	c := dialRaw(t, addr)
	body := c.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"snappy", "zlib", "zstd"}}, {Key: "$db", Value: "admin"}}))
	arr, ok := body.Lookup("compression").ArrayOK()
	if !ok {
		t.Fatalf("no compression in the reply: %v", body)
	}
	vals, _ := arr.Values()
	if len(vals) != 1 || vals[0].StringValue() != "zlib" {
		t.Fatalf("compression = %v, want [zlib] (the client's first that the proxy offers)", arr)
	}
	id := c.send(mustMarshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}, {Key: "$db", Value: "db"}}), 0, wire.CompressorZlib)
	h, _, reply, compressed := c.read()
	if h.ResponseTo != id || !compressed || reply.Lookup("n").Int32() != 1 {
		t.Fatalf("compressed insert: compressed reply %v, %v", compressed, reply)
	}
}

func TestAwaitableHelloStreams(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	c := dialRaw(t, addr)
	first := c.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
	tv := first.Lookup("topologyVersion").Document()
	id := c.send(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: 50}, {Key: "$db", Value: "admin"}}), wire.ExhaustAllowed, 0)
	prev := id
	for i := range 3 {
		h, flags, body, _ := c.read()
		if flags&wire.MoreToCome == 0 {
			t.Fatalf("streamed reply %d has no moreToCome", i)
		}
		if i == 0 && h.ResponseTo != id || i > 0 && h.ResponseTo != prev {
			t.Fatalf("streamed reply %d answers %d, want %d", i, h.ResponseTo, prev)
		}
		prev = h.RequestID
		if !bson.Raw(body.Lookup("topologyVersion").Document()).Lookup("processId").Equal(bson.Raw(tv).Lookup("processId")) {
			t.Fatalf("the stream's topologyVersion changed: %v", body)
		}
	}
}

// TestHelloAnsweredWhileTheUpstreamIsDown: once the proxy has answered a
// hello, it answers the next ones at once, as a mongos does whatever its
// shards do, while no upstream server is available: a driver that connects
// then (its pool's new connection, a monitor's reconnection, another
// application) sees the proxy, and its operations get the upstream's
// error. Waiting for the upstream there, as before, held each such
// driver's handshake up to QueueTimeout, past its server selection
// timeout, so that the proxy itself looked down.
func TestHelloAnsweredWhileTheUpstreamIsDown(t *testing.T) {
	rs := startReplicaSet(t, 1)
	down := make(chan struct{}, 1)
	client, err := mongopool.NewClient(rs.URI(), mongopool.WithTopologyEventHandler(func(e topology.Event) {
		if c, ok := e.(*topology.TopologyDescriptionChanged); ok && c.Previous.Len() > 0 && !hasDataBearing(c.New) {
			select {
			case down <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := proxy.New(client, proxy.Config{QueueTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	addr, served := serve(t, p, proxy.Mongos)
	defer func() {
		p.Close()
		<-served
	}()

	hello := mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	before := dialRaw(t, addr).roundTrip(hello)
	checkMongosHello(t, before, false)

	if err := rs.Stop(0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-down:
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy's client never saw the replica set without a data-bearing member")
	}
	c := dialRaw(t, addr)
	c.nc.SetDeadline(time.Now().Add(10 * time.Second)) // the old wait: an hour
	after := c.roundTrip(hello)
	checkMongosHello(t, after, false)
	if a, b := after.Lookup("maxWireVersion").Int32(), before.Lookup("maxWireVersion").Int32(); a != b {
		t.Errorf("maxWireVersion %d while the upstream is down, %d before", a, b)
	}
	// An operation waits for the upstream, within its maxTimeMS, and
	// fails with a clear error.
	reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: 200}, {Key: "$db", Value: "db"}}))
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 0 {
		t.Errorf("a find while the upstream is down: %v, want an error", reply)
	}
}

func hasDataBearing(d topology.Description) bool {
	for _, sd := range d.Servers() {
		if sd.Type.DataBearing() {
			return true
		}
	}
	return false
}
