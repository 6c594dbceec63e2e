package connection_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
)

// compressed encodes body as an OP_MSG answering responseTo, compressed
// with c.
func compressed(t testing.TB, responseTo int32, body bson.Raw, c wire.CompressorID) []byte {
	out, err := wire.AppendCompressed(nil, opMsg(t, responseTo, body), c, wire.ZlibDefaultLevel)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compressedFrame builds an OP_COMPRESSED answering responseTo by hand,
// claiming size bytes once decompressed.
func compressedFrame(responseTo, size int32, c wire.CompressorID, payload []byte) []byte {
	out := wire.AppendHeader(nil, wire.Header{MessageLength: int32(16 + 9 + len(payload)), RequestID: 1, ResponseTo: responseTo, OpCode: wire.OpCompressed})
	out = binary.LittleEndian.AppendUint32(out, uint32(wire.OpMsg))
	out = binary.LittleEndian.AppendUint32(out, uint32(size))
	return append(append(out, byte(c)), payload...)
}

// zstdRLE builds a zstd frame of blocks RLE blocks of 128 KiB of zeros
// each, 4 bytes apiece, with a 128 KiB window: 16,384 of them (64 KiB)
// inflate to 2 GiB.
func zstdRLE(blocks int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38}
	for i := range blocks {
		h := uint32(128<<10)<<3 | 1<<1
		if i == blocks-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

var okBody = mustRaw(bson.D{{Key: "ok", Value: 1.0}})

func dialWith(t *testing.T, cfg *connection.Config) (*connection.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connection.Dial(ctx, cfg, connection.Hooks{})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestDecompressionBombRefused: a server announcing limits of 2 GiB answers
// four connections at once with a 64 KiB zstd frame that inflates to 2 GiB.
// The limits are lowered to MongoDB's, the frame is refused as a protocol
// error, and the four round trips allocate less than 64 MiB in all.
func TestDecompressionBombRefused(t *testing.T) {
	const maxInt32 = math.MaxInt32
	bomb := zstdRLE(16384)
	for _, negotiate := range []bool{true, false} {
		t.Run("zstd negotiated "+strconv.FormatBool(negotiate), func(t *testing.T) {
			s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
				if n == 0 {
					extra := []bson.E{{Key: "maxBsonObjectSize", Value: int32(maxInt32)}, {Key: "maxMessageSizeBytes", Value: int32(maxInt32)}, {Key: "maxWriteBatchSize", Value: int32(maxInt32)}}
					if negotiate {
						extra = append(extra, bson.E{Key: "compression", Value: bson.A{"zstd"}})
					}
					return opMsg(t, id, helloReply(extra...))
				}
				return compressedFrame(id, maxInt32-16, wire.CompressorZstd, bomb)
			})
			cfg := &connection.Config{Address: s.l.Addr().String(), Handshake: handshake.Options{Compressors: []string{"zstd"}}}
			if !negotiate {
				cfg.Handshake.Compressors = nil
			}
			var conns []*connection.Conn
			for range 4 {
				c, err := dialWith(t, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if d := c.Description(); d.MaxMessageSizeBytes != 48000000 || d.MaxBSONObjectSize != 16<<20 || d.MaxWriteBatchSize != 100000 {
					t.Fatalf("limits %d/%d/%d, want MongoDB's", d.MaxMessageSizeBytes, d.MaxBSONObjectSize, d.MaxWriteBatchSize)
				}
				conns = append(conns, c)
			}
			errs := make(chan error, len(conns))
			got := testkit.Allocated(func() {
				var wg sync.WaitGroup
				for _, c := range conns {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						_, err := c.RoundTrip(ctx, ping)
						errs <- err
					})
				}
				wg.Wait()
			})
			want := "above the maximum message size 48000000"
			if !negotiate {
				want = "OP_COMPRESSED with zstd received, but no compressor was negotiated"
			}
			for range conns {
				if err := <-errs; !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want a protocol error mentioning %q", err, want)
				}
			}
			t.Logf("four round trips answered with a 2 GiB bomb allocated %d bytes", got)
			if got > 64<<20 {
				t.Errorf("four round trips answered with a 2 GiB bomb allocated %d bytes", got)
			}
		})
	}
}

// TestDecompressionStopsAtDeadline: a reply inflating to 40 MiB under a
// context whose deadline passes once inflation is under way. The round trip
// returns the deadline error; the reply was read whole, so the connection
// stays usable.
func TestDecompressionStopsAtDeadline(t *testing.T) {
	s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
		switch n {
		case 0:
			return opMsg(t, id, helloReply(bson.E{Key: "compression", Value: bson.A{"zstd"}}))
		case 1:
			return compressedFrame(id, 40<<20, wire.CompressorZstd, zstdRLE(40<<20/(128<<10)))
		}
		return opMsg(t, id, okBody)
	})
	c, err := dialWith(t, &connection.Config{Address: s.l.Addr().String(), Handshake: handshake.Options{Compressors: []string{"zstd"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The deadline passes after three looks at the context: one before the
	// command, one before inflating, one after the first of 40 steps (the
	// margin of steps leaves room for a look or two more).
	done := make(chan error, 1)
	go func() { _, err := c.RoundTrip(testkit.ExpiresAfter(3), ping); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the round trip did not return")
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if c.Err() != nil {
		t.Fatalf("connection broken: %v", c.Err())
	}
	if _, err := c.RoundTrip(context.Background(), ping); err != nil {
		t.Fatalf("next command: %v", err)
	}
}

// TestHugeHelloReply: a 41 MB hello reply (3 million hosts) is refused
// from its header, before limits are negotiated; a 14 MB one (a million
// saslSupportedMechs) is read, and Parse keeps a bounded part of it.
func TestHugeHelloReply(t *testing.T) {
	huge := testkit.HugeArrayHello("hosts", 3_000_000, func(int) string { return "" })
	if len(huge) < 40_000_000 {
		t.Fatalf("test hello of %d bytes", len(huge))
	}
	// The replies are built before measuring; the hello's requestID is
	// patched in.
	answer := func(reply []byte) func(int, int32, bson.Raw) []byte {
		return func(_ int, id int32, _ bson.Raw) []byte {
			binary.LittleEndian.PutUint32(reply[8:], uint32(id))
			return reply
		}
	}
	s := startScript(t, answer(opMsg(t, 0, huge)))
	var err error
	got := testkit.Allocated(func() { _, err = dialWith(t, &connection.Config{Address: s.l.Addr().String()}) })
	if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "exceeds the maximum message size 16793625") {
		t.Errorf("err = %v, want the hello refused for its size", err)
	}
	t.Logf("a %d-byte hello: %d bytes allocated", len(huge), got)
	if got > 64<<20 {
		t.Errorf("a %d-byte hello allocated %d bytes", len(huge), got)
	}

	big := testkit.HugeArrayHello("saslSupportedMechs", 1_000_000, func(int) string { return "M" })
	if len(big) > handshake.MaxReplySize {
		t.Fatalf("test hello of %d bytes is above the bound", len(big))
	}
	s = startScript(t, answer(opMsg(t, 0, big)))
	var c *connection.Conn
	got = testkit.Allocated(func() { c, err = dialWith(t, &connection.Config{Address: s.l.Addr().String()}) })
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Description().SaslSupportedMechs); n == 0 || n > 32 {
		t.Errorf("kept %d saslSupportedMechs", n)
	}
	t.Logf("a %d-byte hello: %d bytes allocated", len(big), got)
	if got > 64<<20 {
		t.Errorf("a %d-byte hello allocated %d bytes", len(big), got)
	}
}

// TestCompressedReplyNeedsNegotiation: an OP_COMPRESSED reply must use a
// compressor both sides listed in the handshake; the hello's own reply may
// use any the client offered.
func TestCompressedReplyNeedsNegotiation(t *testing.T) {
	with := func(c wire.CompressorID) func(int32) []byte {
		return func(id int32) []byte { return compressed(t, id, okBody, c) }
	}
	noop := func(id int32) []byte {
		plain := opMsg(t, id, okBody)
		return compressedFrame(id, int32(len(plain)-16), wire.CompressorNoop, plain[16:])
	}
	tests := []struct {
		name   string
		ours   []string
		theirs bson.A             // the hello's compression field; nil for none
		hello  wire.CompressorID  // the hello reply's compressor; 0 for none
		reply  func(int32) []byte // the ping's reply
		want   string             // "" for success
		atDial bool               // the error comes from Dial
	}{
		{name: "none negotiated", reply: with(wire.CompressorSnappy), want: "OP_COMPRESSED with snappy received, but no compressor was negotiated"},
		{name: "another than negotiated", ours: []string{"snappy"}, theirs: bson.A{"snappy"}, reply: with(wire.CompressorZstd), want: "but only snappy was negotiated"},
		{name: "noop", ours: []string{"snappy"}, theirs: bson.A{"snappy"}, reply: noop, want: "OP_COMPRESSED with noop received"},
		{name: "offered but not listed", ours: []string{"snappy", "zlib"}, theirs: bson.A{"snappy"}, reply: with(wire.CompressorZlib), want: "but only snappy was negotiated"},
		{name: "second of two negotiated", ours: []string{"snappy", "zlib"}, theirs: bson.A{"snappy", "zlib"}, reply: with(wire.CompressorZlib)},
		{name: "hello with an offered compressor", ours: []string{"zlib"}, theirs: bson.A{"zlib"}, hello: wire.CompressorZlib, reply: with(wire.CompressorZlib)},
		{name: "hello with another", ours: []string{"zlib"}, theirs: bson.A{"zlib"}, hello: wire.CompressorZstd, want: "OP_COMPRESSED with zstd received, but only zlib was negotiated", atDial: true},
		{name: "hello without any offered", hello: wire.CompressorSnappy, want: "no compressor was negotiated", atDial: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
				if n > 0 {
					return tc.reply(id)
				}
				var extra []bson.E
				if tc.theirs != nil {
					extra = append(extra, bson.E{Key: "compression", Value: tc.theirs})
				}
				if tc.hello != 0 {
					return compressed(t, id, helloReply(extra...), tc.hello)
				}
				return opMsg(t, id, helloReply(extra...))
			})
			c, err := dialWith(t, &connection.Config{Address: s.l.Addr().String(), Handshake: handshake.Options{Compressors: tc.ours}})
			if tc.atDial {
				if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("dial: err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.RoundTrip(context.Background(), ping)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), tc.want) || c.Err() == nil {
				t.Fatalf("err = %v (connection error %v), want a protocol error mentioning %q", err, c.Err(), tc.want)
			}
		})
	}
}

// padded returns a ping command of exactly size bytes, padded with a
// binary field of random bytes (which do not compress).
func padded(t *testing.T, size int) bson.Raw {
	t.Helper()
	base := len(mustRaw(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "pad", Value: bson.Binary{Data: []byte{}}}}))
	data := make([]byte, size-base)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	cmd := mustRaw(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}, {Key: "pad", Value: bson.Binary{Data: data}}})
	if len(cmd) != size {
		t.Fatalf("padded command of %d bytes, want %d", len(cmd), size)
	}
	return cmd
}

// wantSizeLimit checks that err is a *wire.SizeLimitError with these fields.
func wantSizeLimit(t *testing.T, err error, limit string, size, maxSize int) {
	t.Helper()
	var se *wire.SizeLimitError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *wire.SizeLimitError", err)
	}
	if se.Limit != limit || se.Size != size || se.Max != maxSize {
		t.Errorf("SizeLimitError %+v, want %s, %d, %d", *se, limit, size, maxSize)
	}
	for _, w := range []string{limit, strconv.Itoa(size), strconv.Itoa(maxSize), "not sent"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if errors.Is(err, wire.ErrProtocol) {
		t.Errorf("error %q matches ErrProtocol", err)
	}
}

// TestOversizedCommandRefused runs commands just within and just over
// MongoDB's limits against the test server: the one over is refused before
// anything is sent, and the connection runs the next command.
func TestOversizedCommandRefused(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := dialWith(t, &connection.Config{Address: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const maxCmd = 16<<20 + 16<<10
	if _, err := c.RoundTrip(ctx, padded(t, maxCmd)); err != nil {
		t.Fatalf("a command of maxBsonObjectSize + 16 KiB: %v", err)
	}
	pings := srv.Stats().Commands["ping"]
	_, err = c.RoundTrip(ctx, padded(t, maxCmd+1))
	wantSizeLimit(t, err, "maxBsonObjectSize", maxCmd+1, maxCmd)
	if c.Err() != nil {
		t.Fatalf("connection broken: %v", c.Err())
	}
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatalf("next command: %v", err)
	}
	if got := srv.Stats().Commands["ping"]; got != pings+1 {
		t.Errorf("the server received %d pings after the refused one, want 1", got-pings)
	}
}

// TestOversizedMessageRefused: against a server announcing 20,000-byte
// limits, a command within maxBsonObjectSize + 16 KiB whose message is over
// maxMessageSizeBytes is refused unsent; one whose message fits but grows
// past the limit when compressed is sent uncompressed.
func TestOversizedMessageRefused(t *testing.T) {
	const limit = 20000
	s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
		if n == 0 {
			return opMsg(t, id, helloReply(bson.E{Key: "maxBsonObjectSize", Value: int32(limit)}, bson.E{Key: "maxMessageSizeBytes", Value: int32(limit)},
				bson.E{Key: "compression", Value: bson.A{"snappy"}}))
		}
		return compressed(t, id, okBody, wire.CompressorSnappy)
	})
	c, err := dialWith(t, &connection.Config{Address: s.l.Addr().String(), Handshake: handshake.Options{Compressors: []string{"snappy"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const msgOverhead = 16 + 4 + 1 // header, flagBits, kind 0
	_, err = c.RoundTrip(ctx, padded(t, limit-msgOverhead+1))
	wantSizeLimit(t, err, "maxMessageSizeBytes", limit+1, limit)
	_, err = c.RoundTrip(ctx, padded(t, limit+wire.CommandOverhead+1))
	wantSizeLimit(t, err, "maxBsonObjectSize", limit+wire.CommandOverhead+1, limit+wire.CommandOverhead)
	if c.Err() != nil {
		t.Fatalf("connection broken: %v", c.Err())
	}
	if got := s.commands(); len(got) != 1 {
		t.Fatalf("the server received %q, want the hello only", got)
	}

	// Random bytes grow a little under snappy: this one fits only
	// uncompressed.
	cmd := padded(t, limit-msgOverhead)
	plain := opMsg(t, 0, cmd)
	comp, _ := wire.AppendCompressed(nil, plain, wire.CompressorSnappy, 0)
	if len(plain) != limit || len(comp) <= limit {
		t.Fatalf("test command: %d bytes plain, %d compressed", len(plain), len(comp))
	}
	if _, err := c.RoundTrip(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.op != wire.OpMsg || r.size != limit {
		t.Errorf("the server received %+v, want the %d-byte OP_MSG", r, limit)
	}
	// A small command is still compressed.
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.op != wire.OpCompressed {
		t.Errorf("the server received %+v, want an OP_COMPRESSED", r)
	}
}

// TestUnaskedBytesBeforeAReply: a server that sends a message nobody asked
// for, between two replies, breaks the connection with a protocol error at
// the next round trip, whether the message comes with the reply before or
// in a write of its own once the client has that reply.
func TestUnaskedBytesBeforeAReply(t *testing.T) {
	for _, apart := range []bool{false, true} {
		t.Run(map[bool]string{false: "with the reply", true: "after it"}[apart], func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			replied, unasked := make(chan struct{}), make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				nc, err := l.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				for n := 0; ; n++ {
					msg, err := wire.ReadMessage(nc, 0)
					if err != nil {
						return
					}
					h, _ := wire.ParseHeader(msg)
					out := opMsg(t, h.RequestID, okBody)
					switch {
					case n == 0:
						out = opMsg(t, h.RequestID, helloReply())
					case n == 1 && !apart:
						out = append(out, opMsg(t, 12345, okBody)...)
					}
					if _, err := nc.Write(out); err != nil {
						return
					}
					if n == 1 && apart {
						<-replied
						// On loopback the bytes are in the client's
						// socket once the write returns.
						nc.Write(opMsg(t, 12345, okBody))
						close(unasked)
					}
				}
			}()
			c, err := dialWith(t, &connection.Config{Address: l.Addr().String()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.RoundTrip(ctx, ping); err != nil {
				t.Fatal(err)
			}
			if apart {
				close(replied)
				<-unasked
			}
			_, err = c.RoundTrip(ctx, ping)
			if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "answers request 12345") {
				t.Fatalf("err = %v, want a protocol error naming the unasked reply", err)
			}
			c.Close()
			<-done
		})
	}
}
