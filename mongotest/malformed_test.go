package mongotest_test

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// header builds a 16-byte message header.
func header(length int32, op wire.OpCode) []byte {
	return wire.AppendHeader(nil, wire.Header{MessageLength: length, RequestID: 1, OpCode: op})
}

// framed builds a message of opcode op around body, with a correct length.
func framed(op wire.OpCode, body ...[]byte) []byte {
	b := header(0, op)
	for _, p := range body {
		b = append(b, p...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

// le32 encodes v in little-endian.
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// malformedInputs are messages that break the wire protocol, each of which
// must make the server close the connection.
func malformedInputs(t testing.TB) map[string][]byte {
	ping, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	pingMsg, _ := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: ping})
	zstdPing, _ := wire.AppendCompressed(nil, pingMsg, wire.CompressorZstd, 0)
	corruptZstd := append([]byte(nil), zstdPing...)
	for i := 25; i < len(corruptZstd); i++ {
		corruptZstd[i] ^= 0x5A
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 512)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	return map[string][]byte{
		"HTTP request":         []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
		"random bytes":         random,
		"huge length":          header(0x7fffffff, wire.OpMsg),
		"above max size":       header(mongotest.MaxMessageSize+1, wire.OpMsg),
		"negative length":      header(-1, wire.OpMsg),
		"length below header":  header(10, wire.OpMsg),
		"unknown opcode":       framed(9999, le32(0)),
		"removed OP_INSERT":    framed(2002, le32(0), []byte("x.c\x00"), ping),
		"reply opcode":         framed(1, make([]byte, 20), ping),
		"empty OP_MSG":         framed(wire.OpMsg),
		"invalid BSON body":    framed(wire.OpMsg, le32(0), []byte{0}, le32(12), []byte{0x02, 'a', 0, 0xff, 0xff, 0xff, 0x7f, 0}),
		"document overrun":     framed(wire.OpMsg, le32(0), []byte{0}, le32(1000), []byte{0}),
		"unknown section kind": framed(wire.OpMsg, le32(0), []byte{0}, ping, []byte{7}, ping),
		"two bodies":           framed(wire.OpMsg, le32(0), []byte{0}, ping, []byte{0}, ping),
		"required flag bit":    framed(wire.OpMsg, le32(1<<4), []byte{0}, ping),
		"missing checksum":     framed(wire.OpMsg, le32(1), []byte{0}, ping),
		"unknown compressor":   framed(wire.OpCompressed, le32(uint32(wire.OpMsg)), le32(uint32(len(pingMsg)-16)), []byte{9}, pingMsg[16:]),
		"compression bomb":     framed(wire.OpCompressed, le32(uint32(wire.OpMsg)), le32(1<<30), []byte{1}, []byte{0xff, 0xff}),
		"corrupt zstd":         corruptZstd,
		"nested compression":   framed(wire.OpCompressed, le32(uint32(wire.OpCompressed)), le32(4), []byte{0}, le32(0)),
		"query without NUL":    framed(2004, le32(0), []byte("admin.$cmd")),
		"query truncated doc":  framed(2004, le32(0), []byte("admin.$cmd\x00"), le32(0), le32(1), ping[:10]),
		"query trailing bytes": framed(2004, le32(0), []byte("admin.$cmd\x00"), le32(0), le32(1), ping, ping, []byte{1}),
	}
}

// TestMalformedInput sends each malformed message on its own connection
// and checks that the server closes that connection, and only that one:
// a raw connection and a driver connected beforehand keep working.
func TestMalformedInput(t *testing.T) {
	srv := start(t)
	bystander := dialRaw(t, srv)
	checkOK(t, bystander.run(cmd("admin", bson.E{Key: "hello", Value: 1})))
	client := connect(t, srv.URI())
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	inputs := malformedInputs(t)
	for name, input := range inputs {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, srv)
			r.send(input)
			r.expectClosed()
		})
	}
	// The closes are counted once each connection goroutine has ended.
	waitFor(t, "a protocol error counted for each input", func() bool {
		return srv.Stats().ProtocolErrors >= int64(len(inputs))
	})
	if n := srv.Stats().ProtocolErrors; n != int64(len(inputs)) {
		t.Errorf("ProtocolErrors = %d, want %d", n, len(inputs))
	}
	checkOK(t, bystander.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Errorf("Ping after the malformed input: %v", err)
	}
}

// TestTruncatedMessage checks that a client hanging up in the middle of a
// message only ends its own connection.
func TestTruncatedMessage(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	ping := msg(t, 1, &wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))})
	r.send(ping[:len(ping)-3])
	r.nc.(*net.TCPConn).CloseWrite()
	r.expectClosed()
	checkOK(t, dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1})))
}

// FuzzServer sends arbitrary bytes to the server and checks that it
// neither crashes nor stops serving other connections. `go test` runs the
// seeds; `go test -fuzz FuzzServer ./mongotest/` explores.
func FuzzServer(f *testing.F) {
	srv, err := mongotest.Start()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	if err := srv.AddUser("admin", "user", "pencil"); err != nil {
		f.Fatal(err)
	}
	for _, input := range malformedInputs(f) {
		f.Add(input)
	}
	seed := func(m *wire.Msg) []byte {
		b, _ := wire.AppendMsg(nil, 1, 0, m)
		return b
	}
	for _, d := range []bson.D{
		{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "compression", Value: bson.A{"zstd"}}},
		{{Key: "insert", Value: "c"}, {Key: "$db", Value: "x"}},
		{{Key: "find", Value: "c"}, {Key: "$db", Value: "x"}, {Key: "filter", Value: bson.D{{Key: "a.b", Value: bson.A{1}}}}},
		{{Key: "saslStart", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "mechanism", Value: "SCRAM-SHA-256"}, {Key: "payload", Value: bson.Binary{Data: []byte("n,,n=user,r=abc")}}},
		{{Key: "saslStart", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "mechanism", Value: "PLAIN"}, {Key: "payload", Value: "\x00\x00"}},
	} {
		body, _ := bson.Marshal(d)
		m := seed(&wire.Msg{Body: body})
		f.Add(m)
		z, _ := wire.AppendCompressed(nil, m, wire.CompressorSnappy, 0)
		f.Add(z)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		nc, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(input); err != nil {
			return // the server may close before reading everything
		}
		nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err != nil && !isReset(err) {
			t.Fatalf("reading until the server closes: %v", err)
		}
		// The server still serves.
		checkOK(t, dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1})))
	})
}
