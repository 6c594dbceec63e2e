package mongotest_test

import (
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestChecksum checks that a request's CRC-32C checksum is verified: a
// correct one is accepted, a wrong one closes the connection.
func TestChecksum(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	ping := marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))
	_, reply := r.roundTrip(&wire.Msg{Flags: wire.ChecksumPresent, Body: ping}, nil)
	checkOK(t, reply)

	b := msg(t, 1, &wire.Msg{Flags: wire.ChecksumPresent, Body: ping})
	b[len(b)-1] ^= 0xFF
	r.send(b)
	r.expectClosed()
	if st := srv.Stats(); st.ProtocolErrors != 1 {
		t.Errorf("ProtocolErrors = %d, want 1", st.ProtocolErrors)
	}
}

// TestMoreToCome checks that a request flagged moreToCome gets no reply.
func TestMoreToCome(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	insert := marshal(t, cmd("x",
		bson.E{Key: "insert", Value: "c"},
		bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 1}}}},
		bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}))
	r.send(msg(t, 1, &wire.Msg{Flags: wire.MoreToCome, Body: insert}))
	// The next reply answers the count (roundTrip checks responseTo), and
	// the insert happened.
	reply := r.run(cmd("x", bson.E{Key: "count", Value: "c"}))
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("count after an unacknowledged insert: %s", reply)
	}
}

// TestCompressedReplies checks, for each compressor, that a compressed
// request gets a reply compressed with the same compressor, but for the
// commands that must never be compressed, and that an uncompressed request
// gets an uncompressed reply.
func TestCompressedReplies(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	ping := &wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))}
	hello := &wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "hello", Value: 1}))}
	for _, c := range []wire.CompressorID{wire.CompressorSnappy, wire.CompressorZlib, wire.CompressorZstd, wire.CompressorNoop} {
		t.Run(c.String(), func(t *testing.T) {
			raw := compressedReply(t, r, ping, c)
			if h, _ := wire.ParseHeader(raw); h.OpCode != wire.OpCompressed || wire.CompressorID(raw[24]) != c {
				t.Errorf("reply to a %v ping: %v, compressor %d; want OP_COMPRESSED with %v", c, h, raw[24], c)
			}
			raw = compressedReply(t, r, hello, c)
			if h, _ := wire.ParseHeader(raw); h.OpCode != wire.OpMsg {
				t.Errorf("reply to a %v hello: %v; want an uncompressed OP_MSG", c, h)
			}
		})
	}
	r.send(msg(t, 5, ping))
	if h, _ := wire.ParseHeader(r.read()); h.OpCode != wire.OpMsg {
		t.Errorf("reply to an uncompressed ping: %v; want OP_MSG", h)
	}
	st := srv.Stats()
	for _, name := range []string{"snappy", "zlib", "zstd", "noop"} {
		if st.CompressedReceived[name] != 2 || st.CompressedSent[name] != 1 {
			t.Errorf("%s: received %d, sent %d; want 2 and 1", name, st.CompressedReceived[name], st.CompressedSent[name])
		}
	}

	// A compressor the server does not accept closes the connection.
	only := start(t, mongotest.WithCompressors("snappy"))
	r2 := dialRaw(t, only)
	compressedReply(t, r2, ping, wire.CompressorSnappy)
	b, err := wire.AppendCompressed(nil, msg(t, 9, ping), wire.CompressorZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	r2.send(b)
	r2.expectClosed()
}

// compressedReply sends m compressed with c and returns the raw reply,
// which must succeed.
func compressedReply(t *testing.T, r *rawConn, m *wire.Msg, c wire.CompressorID) []byte {
	t.Helper()
	raw, body := r.roundTrip(m, &c)
	checkOK(t, body)
	return raw
}
