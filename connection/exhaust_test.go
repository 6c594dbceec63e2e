package connection_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/wire"
)

// pipeNet is a Config.DialContext that connects every dial to a net.Pipe
// whose server end serve handles on a goroutine of its own. In a synctest
// bubble its I/O blocks durably and its deadlines follow the bubble's clock.
type pipeNet struct {
	wg    sync.WaitGroup
	serve func(s *pipePeer)
	delay time.Duration // how long a dial takes
}

func (p *pipeNet) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	time.Sleep(p.delay)
	client, server := net.Pipe()
	p.wg.Go(func() {
		defer server.Close()
		p.serve(&pipePeer{c: server})
	})
	return client, nil
}

// pipePeer is the server's end of a pipe, with what a script needs.
type pipePeer struct {
	c    net.Conn
	next int32 // the last requestID the server used
}

// read returns the next request's header and message; ok is false once the
// client has gone.
func (p *pipePeer) read() (wire.Header, *wire.Msg, bool) {
	raw, err := wire.ReadMessage(p.c, 0)
	if err != nil {
		return wire.Header{}, nil, false
	}
	h, m, err := wire.DecodeReply(raw, 0)
	if err != nil {
		return wire.Header{}, nil, false
	}
	return h, m, true
}

// peerIDBase is where a pipePeer's requestIDs start: far from the client's,
// which count from 1 across the process, so that no reply can answer a
// request by chance.
const peerIDBase = 1_500_000_000

// reply sends body as an OP_MSG answering responseTo with flags, and
// returns its requestID.
func (p *pipePeer) reply(t testing.TB, responseTo int32, flags wire.Flag, body bson.Raw) int32 {
	p.next++
	id := peerIDBase + p.next
	out, err := wire.AppendMsg(nil, id, responseTo, &wire.Msg{Flags: flags, Body: body})
	if err != nil {
		t.Error(err)
		return id
	}
	p.c.Write(out)
	return id
}

// hello answers the handshake with helloReply(extra...).
func (p *pipePeer) hello(t testing.TB, extra ...bson.E) bool {
	h, _, ok := p.read()
	if ok {
		p.reply(t, h.RequestID, 0, helloReply(extra...))
	}
	return ok
}

// firstCommand answers the handshake, then reads the command after it; ok is
// false once the client has gone.
func (p *pipePeer) firstCommand(t testing.TB) (wire.Header, *wire.Msg, bool) {
	if !p.hello(t) {
		return wire.Header{}, nil, false
	}
	return p.read()
}

// answerAll answers every request with body until the client goes, and
// returns the names of the commands it answered.
func (p *pipePeer) answerAll(t testing.TB, body bson.Raw) []string {
	var names []string
	for {
		h, m, ok := p.read()
		if !ok {
			return names
		}
		names = append(names, commandNameOf(m.Body))
		p.reply(t, h.RequestID, 0, body)
	}
}

// dialPipe dials a connection through p. When the test ends, the connection
// is closed, then p's server ends are waited for; in a synctest bubble these
// cleanups run before the bubble waits for its goroutines.
func dialPipe(t *testing.T, p *pipeNet) *connection.Conn {
	t.Helper()
	t.Cleanup(p.wg.Wait)
	c, err := connection.Dial(t.Context(), &connection.Config{Address: "db.example:27017", DialContext: p.dial}, connection.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startStream dials a connection through a pipe whose server answers the
// handshake, then the awaitable hello with a first reply (counter 1,
// moreToCome), and goes on with then, given the hello's requestID and the
// first reply's. It returns the connection once the client has read that
// first reply.
func startStream(t *testing.T, then func(s *pipePeer, req, prev int32)) *connection.Conn {
	t.Helper()
	c := dialPipe(t, &pipeNet{serve: func(s *pipePeer) {
		h, _, ok := s.firstCommand(t)
		if !ok {
			return
		}
		prev := s.reply(t, h.RequestID, wire.MoreToCome, counterBody(1))
		then(s, h.RequestID, prev)
	}})
	if _, err := c.RoundTripExhaust(t.Context(), awaitableHello); err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	awaitableHello = mustRaw(bson.D{{Key: "hello", Value: 1}, {Key: "maxAwaitTimeMS", Value: int64(10000)}, {Key: "$db", Value: "admin"}})
	counterBody    = func(n int64) bson.Raw { return mustRaw(bson.D{{Key: "counter", Value: n}, {Key: "ok", Value: 1.0}}) }
)

func counterOf(t *testing.T, reply bson.Raw) int64 {
	t.Helper()
	v, err := reply.LookupErr("counter")
	if err != nil {
		t.Fatalf("reply %v has no counter", reply)
	}
	return v.Int64()
}

// TestExhaustStreamsReplies: RoundTripExhaust sends the command with the
// exhaustAllowed flag; the server streams three replies, each answering the
// previous one, the last without moreToCome. ReadMore reads each in turn, a
// ReadMore past the last fails without touching the connection, and the
// connection then runs commands as before.
func TestExhaustStreamsReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var flags wire.Flag
		p := &pipeNet{serve: func(s *pipePeer) {
			h, m, ok := s.firstCommand(t)
			if !ok {
				return
			}
			flags = m.Flags
			prev := s.reply(t, h.RequestID, wire.MoreToCome, counterBody(1))
			time.Sleep(time.Second)
			prev = s.reply(t, prev, wire.MoreToCome, counterBody(2))
			time.Sleep(time.Second)
			s.reply(t, prev, 0, counterBody(3))
			if h, _, ok = s.read(); ok {
				s.reply(t, h.RequestID, 0, okBody)
			}
		}}
		c := dialPipe(t, p)

		reply, err := c.RoundTripExhaust(t.Context(), awaitableHello)
		if err != nil {
			t.Fatal(err)
		}
		if flags != wire.ExhaustAllowed {
			t.Errorf("the request's flags are %v, want exhaustAllowed", flags)
		}
		if n := counterOf(t, reply); n != 1 || !c.MoreToCome() {
			t.Fatalf("first reply: counter %d, moreToCome %v", n, c.MoreToCome())
		}
		for want := int64(2); want <= 3; want++ {
			start := time.Now()
			reply, err = c.ReadMore(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n := counterOf(t, reply); n != want {
				t.Fatalf("reply %d has counter %d", want, n)
			}
			if d := time.Since(start); d != time.Second {
				t.Errorf("reply %d read after %v, want the server's 1s", want, d)
			}
		}
		if c.MoreToCome() {
			t.Fatal("moreToCome after a reply without it")
		}
		if _, err := c.ReadMore(t.Context()); err == nil || !strings.Contains(err.Error(), "no reply is coming") || c.Err() != nil {
			t.Fatalf("ReadMore past the stream: %v (connection error %v)", err, c.Err())
		}
		if _, err := c.RoundTrip(t.Context(), ping); err != nil {
			t.Fatalf("a command after the stream: %v", err)
		}
	})
}

// TestExhaustWithoutMoreToCome: a server may answer an exhaust request with a
// single reply; the connection is then ready for the next command.
func TestExhaustWithoutMoreToCome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pipeNet{serve: func(s *pipePeer) {
			if s.hello(t) {
				s.answerAll(t, counterBody(7))
			}
		}}
		c := dialPipe(t, p)
		reply, err := c.RoundTripExhaust(t.Context(), awaitableHello)
		if err != nil || counterOf(t, reply) != 7 || c.MoreToCome() {
			t.Fatalf("reply %v, %v, moreToCome %v", reply, err, c.MoreToCome())
		}
		if _, err := c.RoundTrip(t.Context(), ping); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCommandsRefusedWhileStreaming: while replies are still to come, a
// command would interleave with them; RoundTrip and RoundTripExhaust refuse
// it without sending anything, and the stream goes on.
func TestCommandsRefusedWhileStreaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		p := &pipeNet{serve: func(s *pipePeer) {
			h, m, ok := s.firstCommand(t)
			if !ok {
				return
			}
			seen = append(seen, commandNameOf(m.Body))
			prev := s.reply(t, h.RequestID, wire.MoreToCome, counterBody(1))
			s.reply(t, prev, 0, counterBody(2))
			seen = append(seen, s.answerAll(t, okBody)...)
		}}
		c := dialPipe(t, p)
		if _, err := c.RoundTripExhaust(t.Context(), awaitableHello); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RoundTrip(t.Context(), ping); err == nil || !strings.Contains(err.Error(), "replies are still coming") {
			t.Fatalf("RoundTrip while streaming: %v", err)
		}
		if _, err := c.RoundTripExhaust(t.Context(), awaitableHello); err == nil || !strings.Contains(err.Error(), "replies are still coming") {
			t.Fatalf("RoundTripExhaust while streaming: %v", err)
		}
		if c.Err() != nil {
			t.Fatalf("a refused command broke the connection: %v", c.Err())
		}
		if reply, err := c.ReadMore(t.Context()); err != nil || counterOf(t, reply) != 2 {
			t.Fatalf("ReadMore after refused commands: %v, %v", reply, err)
		}
		if _, err := c.RoundTrip(t.Context(), ping); err != nil {
			t.Fatal(err)
		}
		c.Close()
		p.wg.Wait()
		if want := []string{"hello", "ping"}; !equalStrings(seen, want) {
			t.Errorf("the server received %v, want %v", seen, want)
		}
	})
}

func commandNameOf(body bson.Raw) string {
	e, err := body.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExhaustOnlyForHelloAndGetMore: the OP_MSG specification allows the
// exhaustAllowed flag on hello, legacy hello and getMore only; any other
// command is refused before anything is sent.
func TestExhaustOnlyForHelloAndGetMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		p := &pipeNet{serve: func(s *pipePeer) {
			if s.hello(t) {
				seen = s.answerAll(t, okBody)
			}
		}}
		c := dialPipe(t, p)
		if _, err := c.RoundTripExhaust(t.Context(), ping); err == nil || !strings.Contains(err.Error(), `"ping"`) || c.Err() != nil {
			t.Fatalf("exhaust ping: %v (connection error %v)", err, c.Err())
		}
		for _, cmd := range []bson.D{
			{{Key: "isMaster", Value: 1}, {Key: "$db", Value: "admin"}},
			{{Key: "getMore", Value: int64(5)}, {Key: "collection", Value: "c"}, {Key: "$db", Value: "db"}},
		} {
			if _, err := c.RoundTripExhaust(t.Context(), mustRaw(cmd)); err != nil {
				t.Fatalf("exhaust %v: %v", cmd[0].Key, err)
			}
		}
		c.Close()
		p.wg.Wait()
		if want := []string{"isMaster", "getMore"}; !equalStrings(seen, want) {
			t.Errorf("the server received %v, want %v", seen, want)
		}
	})
}

// TestStreamedReplyChecks: a streamed reply gets every check a reply gets,
// and more: it must answer the previous reply, and an error reply must end
// the stream. Each bad one is a protocol error that breaks the connection.
func TestStreamedReplyChecks(t *testing.T) {
	// The compressor keeps state of its own across calls: it must not be
	// first used within a bubble. The first streamed reply of a pipePeer
	// is its second message.
	zstdReply, err := wire.AppendCompressed(nil, msgBytes(t, 5000, peerIDBase+2, 0, counterBody(2)), wire.CompressorZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// second returns the bytes of the reply after the first, which
		// was prev and answered req.
		second func(t *testing.T, req, prev int32) []byte
		want   string
	}{
		{"answers the request, not the previous reply", func(t *testing.T, req, prev int32) []byte {
			return msgBytes(t, 5000, req, 0, counterBody(2))
		}, "answers request"},
		{"error with moreToCome", func(t *testing.T, req, prev int32) []byte {
			return msgBytes(t, 5000, prev, wire.MoreToCome, mustRaw(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no"}}))
		}, "moreToCome set on an error reply"},
		{"length beyond maxMessageSizeBytes", func(t *testing.T, req, prev int32) []byte {
			return wire.AppendHeader(nil, wire.Header{MessageLength: 48000001, RequestID: 5000, ResponseTo: prev, OpCode: wire.OpMsg})
		}, "exceeds the maximum message size 48000000"},
		{"compressed without negotiation", func(t *testing.T, req, prev int32) []byte {
			if prev != peerIDBase+2 {
				t.Errorf("the first streamed reply is %d, not %d", prev, peerIDBase+2)
			}
			return zstdReply
		}, "no compressor was negotiated"},
		{"not BSON", func(t *testing.T, req, prev int32) []byte {
			out := msgBytes(t, 5000, prev, 0, counterBody(2))
			binary.LittleEndian.PutUint32(out[21:], 3) // the body's length
			return out
		}, "document length 3 is below the BSON minimum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := startStream(t, func(s *pipePeer, req, prev int32) {
					s.c.Write(tc.second(t, req, prev))
				})
				_, err := c.ReadMore(t.Context())
				if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), tc.want) || c.Err() == nil {
					t.Fatalf("err = %v (connection error %v), want a protocol error mentioning %q", err, c.Err(), tc.want)
				}
				if _, err := c.ReadMore(t.Context()); err == nil {
					t.Fatal("ReadMore on a broken connection succeeded")
				}
			})
		})
	}
}

// msgBytes encodes an OP_MSG with this header and body.
func msgBytes(t *testing.T, id, responseTo int32, flags wire.Flag, body bson.Raw) []byte {
	out, err := wire.AppendMsg(nil, id, responseTo, &wire.Msg{Flags: flags, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestErrorReplyEndsStream: the server ends a stream with ok: 0 and no
// moreToCome; ReadMore returns the reply and its *wire.CommandError, and the
// connection is usable, as after any error reply.
func TestErrorReplyEndsStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startStream(t, func(s *pipePeer, _, prev int32) {
			s.reply(t, prev, 0, mustRaw(bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "shutting down"}}))
		})
		reply, err := c.ReadMore(t.Context())
		var ce *wire.CommandError
		if !errors.As(err, &ce) || ce.Code != 91 || reply == nil || c.MoreToCome() || c.Err() != nil {
			t.Fatalf("reply %v, err %v, moreToCome %v, connection error %v", reply, err, c.MoreToCome(), c.Err())
		}
	})
}

// TestReadMoreEnds: a server that stops streaming leaves ReadMore waiting
// until ctx's deadline, or until Close; either breaks the connection.
func TestReadMoreEnds(t *testing.T) {
	for _, how := range []string{"deadline", "close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := startStream(t, func(s *pipePeer, _, _ int32) {
					s.read() // until the client goes
				})
				ctx := t.Context()
				if how == "deadline" {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
					defer cancel()
				} else {
					time.AfterFunc(3*time.Second, func() { c.Close() })
				}
				start := time.Now()
				_, err := c.ReadMore(ctx)
				if err == nil || c.Err() == nil {
					t.Fatalf("ReadMore: %v, connection error %v", err, c.Err())
				}
				if d := time.Since(start); d != 3*time.Second {
					t.Errorf("ReadMore returned after %v, want 3s", d)
				}
				if how == "deadline" && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want context.DeadlineExceeded", err)
				}
			})
		})
	}
}

// TestHelloReplyHook: the hook gets the hello's reply as the server sent it
// and the time the hello took (not the dial's), before the reply is
// checked: even a reply that Dial then refuses (wire versions out of range)
// reaches it.
func TestHelloReplyHook(t *testing.T) {
	for _, maxWire := range []int32{21, 5} {
		synctest.Test(t, func(t *testing.T) {
			body := mustRaw(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: maxWire}, {Key: "ok", Value: 1.0}})
			p := &pipeNet{serve: func(s *pipePeer) {
				h, _, ok := s.read()
				if !ok {
					return
				}
				time.Sleep(7 * time.Millisecond)
				s.reply(t, h.RequestID, 0, body)
				s.read()
			}, delay: 5 * time.Millisecond}
			defer p.wg.Wait()
			var got bson.Raw
			var rtt time.Duration
			calls := 0
			hooks := connection.Hooks{HelloReply: func(reply bson.Raw, d time.Duration) { got, rtt = reply, d; calls++ }}
			c, err := connection.Dial(t.Context(), &connection.Config{Address: "db.example:27017", DialContext: p.dial}, hooks)
			if maxWire == 5 {
				if !errors.Is(err, handshake.ErrIncompatible) {
					t.Fatalf("dial: %v, want ErrIncompatible", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			if calls != 1 || !bytes.Equal(got, body) || rtt != 7*time.Millisecond {
				t.Fatalf("maxWireVersion %d: hook called %d times with %v after %v; want once with %v after 7ms", maxWire, calls, got, rtt, bson.Raw(body))
			}
		})
	}
}

// TestMoreToComeNeedsExhaust: a reply with moreToCome to a command sent
// without exhaustAllowed breaks the protocol.
func TestMoreToComeNeedsExhaust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pipeNet{serve: func(s *pipePeer) {
			if h, _, ok := s.firstCommand(t); ok {
				s.reply(t, h.RequestID, wire.MoreToCome, okBody)
			}
		}}
		c := dialPipe(t, p)
		_, err := c.RoundTrip(t.Context(), ping)
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "no exhaust was asked for") || c.Err() == nil || c.MoreToCome() {
			t.Fatalf("err = %v (connection error %v, moreToCome %v), want a protocol error", err, c.Err(), c.MoreToCome())
		}
	})
}

// TestDialContextError: an error of the DialContext function is Dial's.
func TestDialContextError(t *testing.T) {
	refused := errors.New("no route")
	_, err := connection.Dial(t.Context(), &connection.Config{Address: "db.example:27017", DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, refused
	}}, connection.Hooks{})
	if !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the dial function's", err)
	}
}

// TestExhaustOverTCP: the stream over a real socket, against a scripted
// server on loopback.
func TestExhaustOverTCP(t *testing.T) {
	s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
		if n == 0 {
			return opMsg(t, id, helloReply())
		}
		var out []byte
		prev := id
		for i := int64(1); i <= 3; i++ {
			flags := wire.MoreToCome
			if i == 3 {
				flags = 0
			}
			rid := int32(9000 + i)
			out = append(out, msgBytes(t, rid, prev, flags, counterBody(i))...)
			prev = rid
		}
		return out
	})
	c := dial(t, s.l.Addr().String(), 10*time.Second)
	reply, err := c.RoundTripExhaust(t.Context(), awaitableHello)
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{counterOf(t, reply)}
	for c.MoreToCome() {
		if reply, err = c.ReadMore(t.Context()); err != nil {
			t.Fatal(err)
		}
		got = append(got, counterOf(t, reply))
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("counters %v, want [1 2 3]", got)
	}
}

// TestStreamedDecompressionInterrupted: ctx ending the decompression of a
// streamed reply breaks the connection (unlike a command's reply, read
// whole): whether the server is still streaming is in the part not
// decompressed.
func TestStreamedDecompressionInterrupted(t *testing.T) {
	s := startScript(t, func(n int, id int32, _ bson.Raw) []byte {
		if n == 0 {
			return opMsg(t, id, helloReply(bson.E{Key: "compression", Value: bson.A{"zstd"}}))
		}
		first := msgBytes(t, 9001, id, wire.MoreToCome, counterBody(1))
		return append(first, compressedFrame(9001, 40<<20, wire.CompressorZstd, zstdRLE(40<<20/(128<<10)))...)
	})
	c, err := dialWith(t, &connection.Config{Address: s.l.Addr().String(), Handshake: handshake.Options{Compressors: []string{"zstd"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RoundTripExhaust(t.Context(), awaitableHello); err != nil || !c.MoreToCome() {
		t.Fatalf("first reply: %v, moreToCome %v", err, c.MoreToCome())
	}
	// The deadline passes after two looks at the context: one before
	// reading, one after the first of 40 steps of inflation.
	_, err = c.ReadMore(testkit.ExpiresAfter(2))
	if !errors.Is(err, context.DeadlineExceeded) || c.Err() == nil {
		t.Fatalf("err = %v, connection error %v; want context.DeadlineExceeded and a broken connection", err, c.Err())
	}
}
