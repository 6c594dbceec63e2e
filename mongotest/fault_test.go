package mongotest_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// inject injects f and fails the test if the server refuses it.
func inject(t *testing.T, srv *mongotest.Server, f mongotest.Fault) (remove func()) {
	t.Helper()
	remove, err := srv.InjectFault(f)
	if err != nil {
		t.Fatalf("InjectFault(%+v): %v", f, err)
	}
	return remove
}

// sendPing sends a ping, compressed with c unless c is nil, and returns its
// requestID.
func (r *rawConn) sendPing(c *wire.CompressorID) int32 {
	r.t.Helper()
	return r.sendMsg(&wire.Msg{Body: marshal(r.t, pingCmd)}, c)
}

// tryRead reads one message within d, returning the error rather than
// failing.
func (r *rawConn) tryRead(d time.Duration) ([]byte, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	return wire.ReadMessage(r.nc, 0)
}

// expectSilence checks that nothing arrives within a short wait. It can
// only miss a reply that comes later, never fail for a slow machine.
func (r *rawConn) expectSilence() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	n, err := r.nc.Read(b[:])
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		r.t.Fatalf("read %d bytes, %v; want nothing until the deadline", n, err)
	}
}

// waitFor polls cond, which becomes true when the server has reached a
// state no event announces, for at most testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestInjectFaultRejects(t *testing.T) {
	srv := start(t)
	for _, tc := range []struct {
		f    mongotest.Fault
		want string
	}{
		{mongotest.Fault{}, "unknown fault kind 0"},
		{mongotest.Fault{Kind: 99}, "unknown fault kind 99"},
		{mongotest.Fault{Kind: mongotest.FaultDelay}, "FaultDelay needs a positive Delay"},
		{mongotest.Fault{Kind: mongotest.FaultDelay, Delay: -time.Second}, "FaultDelay needs a positive Delay"},
		{mongotest.Fault{Kind: mongotest.FaultHang, Delay: time.Second}, "FaultHang takes no Delay"},
		{mongotest.Fault{Kind: mongotest.FaultHang, Times: -1}, "Times is -1"},
		{mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"ping", ""}}, "empty command name"},
		{mongotest.Fault{Kind: mongotest.FaultSilentAccept, Commands: []string{"hello"}}, "FaultSilentAccept"},
	} {
		remove, err := srv.InjectFault(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) || remove != nil {
			t.Errorf("InjectFault(%+v): %v; want an error about %q", tc.f, err, tc.want)
		}
	}
	// Nothing was injected: the server answers.
	dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1}))

	remove := inject(t, srv, mongotest.Fault{Kind: mongotest.FaultHang})
	srv.Close()
	remove() // after Close: harmless
	remove()
	if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultHang}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("InjectFault after Close: %v; want an error saying the server is closed", err)
	}
}

// Each reply fault, seen from a raw client, with and without compression.
func TestFaultReplies(t *testing.T) {
	zlib := wire.CompressorZlib
	for _, comp := range []*wire.CompressorID{nil, &zlib} {
		name := "plain"
		if comp != nil {
			name = "zlib"
		}
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				kind  mongotest.FaultKind
				check func(t *testing.T, r *rawConn, id int32)
			}{
				{mongotest.FaultWrongResponseTo, func(t *testing.T, r *rawConn, id int32) {
					raw := r.read()
					h, reply, err := wire.DecodeReply(raw, 0)
					if err != nil {
						t.Fatal(err)
					}
					checkOK(t, reply.Body)
					if h.ResponseTo == id {
						t.Fatalf("responseTo is the request's id %d", id)
					}
					r.run(cmd("admin", bson.E{Key: "ping", Value: 1})) // the connection stays open
				}},
				{mongotest.FaultNotBSON, func(t *testing.T, r *rawConn, id int32) {
					raw := r.read()
					h, _ := wire.ParseHeader(raw)
					wantOp := wire.OpMsg
					if comp != nil {
						wantOp = wire.OpCompressed
					}
					if h.ResponseTo != id || h.OpCode != wantOp || int(h.MessageLength) != len(raw) {
						t.Fatalf("header %v of a %d-byte reply; want a valid %v header answering %d", h, len(raw), wantOp, id)
					}
					if _, _, err := wire.DecodeReply(raw, 0); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "body section") {
						t.Fatalf("DecodeReply: %v; want a protocol error about the body", err)
					}
					r.run(cmd("admin", bson.E{Key: "ping", Value: 1})) // the connection stays open
				}},
				{mongotest.FaultTruncatedFrame, func(t *testing.T, r *rawConn, id int32) {
					if _, err := r.tryRead(5 * time.Second); !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("read: %v; want a message truncated by the end of the stream", err)
					}
				}},
				{mongotest.FaultResetMidReply, func(t *testing.T, r *rawConn, id int32) {
					if _, err := r.tryRead(5 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
						t.Fatalf("read: %v; want a connection reset", err)
					}
				}},
				{mongotest.FaultNegativeLength, checkLength(-1)},
				{mongotest.FaultTinyLength, checkLength(4)},
				{mongotest.FaultHugeLength, checkLength(mongotest.HugeMessageLength)},
				{mongotest.FaultHang, func(t *testing.T, r *rawConn, id int32) {
					r.expectSilence()
				}},
			} {
				t.Run(tc.kind.String(), func(t *testing.T) {
					srv := start(t)
					r := dialRaw(t, srv)
					inject(t, srv, mongotest.Fault{Kind: tc.kind, Commands: []string{"ping"}, Times: 1})
					tc.check(t, r, r.sendPing(comp))
					closeAndCheck(t, srv)
					if st := srv.Stats(); st.ProtocolErrors != 0 {
						t.Errorf("the server counted its own fault as the client's protocol error: %+v", st)
					}
				})
			}
		})
	}
}

// checkLength returns a check that the reply declares length, and that the
// server then closes the connection.
func checkLength(length int32) func(t *testing.T, r *rawConn, id int32) {
	return func(t *testing.T, r *rawConn, id int32) {
		r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		var hdr [wire.HeaderSize]byte
		if _, err := io.ReadFull(r.nc, hdr[:]); err != nil {
			t.Fatal(err)
		}
		h, _ := wire.ParseHeader(hdr[:])
		if h.MessageLength != length || h.ResponseTo != id {
			t.Fatalf("header %v; want length %d answering %d", h, length, id)
		}
		if _, err := io.Copy(io.Discard, r.nc); err != nil {
			t.Fatalf("after the bad frame: %v; want the connection closed", err)
		}
		if _, err := wire.ReadMessage(strings.NewReader(string(hdr[:])), 0); !errors.Is(err, wire.ErrProtocol) {
			t.Fatalf("ReadMessage accepts the header %v: %v", h, err)
		}
	}
}

func TestFaultDelay(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	const delay = 20 * time.Millisecond
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultDelay, Delay: delay, Times: 1})
	began := time.Now()
	id := r.sendPing(nil)
	raw, err := r.tryRead(testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < delay {
		t.Fatalf("the reply came after %v, before the %v delay", waited, delay)
	}
	h, reply, err := wire.DecodeReply(raw, 0)
	if err != nil || h.ResponseTo != id {
		t.Fatalf("delayed reply %v: %v", h, err)
	}
	checkOK(t, reply.Body)
	r.run(cmd("admin", bson.E{Key: "ping", Value: 1})) // Times: 1 is used up
}

// Commands, the hello aliases, Times, remove, and the order of faults.
func TestFaultTargets(t *testing.T) {
	srv := start(t)
	ping := cmd("admin", bson.E{Key: "ping", Value: 1})

	// A fault on find leaves ping alone.
	removeFind := inject(t, srv, mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"find"}})
	dialRaw(t, srv).run(ping)
	removeFind()
	dialRaw(t, srv).run(cmd("db", bson.E{Key: "find", Value: "c"}))

	// "hello" also catches isMaster over OP_MSG, and ismaster over the
	// legacy OP_QUERY, whose OP_REPLY gets the garbage.
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultNotBSON, Commands: []string{"hello"}, Times: 3})
	r := dialRaw(t, srv)
	for _, name := range []string{"hello", "isMaster"} {
		r.sendPingLike(name)
		raw := r.read()
		if _, _, err := wire.DecodeReply(raw, 0); !errors.Is(err, wire.ErrProtocol) {
			t.Fatalf("%s: DecodeReply: %v; want the garbage reply", name, err)
		}
	}
	r.send(opQuery(77, "admin.$cmd", marshal(t, bson.D{{Key: "ismaster", Value: 1}})))
	raw := r.read()
	doc := bson.Raw(raw[wire.HeaderSize+20:])
	if h, _ := wire.ParseHeader(raw); h.ResponseTo != 77 || doc.Validate() == nil {
		t.Fatalf("legacy hello reply %v, document %x: want a framed reply to 77 with a broken document", h, doc)
	}
	// Times: 3 is used up.
	r.run(cmd("admin", bson.E{Key: "hello", Value: 1}))

	// The first fault injected applies; the second waits for its turn.
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultWrongResponseTo, Commands: []string{"ping"}, Times: 1})
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultNotBSON, Times: 1})
	id := r.sendPing(nil)
	raw = r.read()
	if h, _, err := wire.DecodeReply(raw, 0); err != nil || h.ResponseTo == id {
		t.Fatalf("first fault: reply %v, %v; want a valid reply with a wrong responseTo", h, err)
	}
	r.sendPing(nil)
	raw = r.read()
	if _, _, err := wire.DecodeReply(raw, 0); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("second fault: %v; want the garbage reply", err)
	}
	r.run(ping)
}

// sendPingLike sends the command name: 1 on admin.
func (r *rawConn) sendPingLike(name string) {
	r.t.Helper()
	r.sendMsg(&wire.Msg{Body: marshal(r.t, cmd("admin", bson.E{Key: name, Value: 1}))}, nil)
}

func TestFaultSilentAccept(t *testing.T) {
	pki := testpki.New(t)
	t.Run("tcp", func(t *testing.T) {
		srv := start(t)
		inject(t, srv, mongotest.Fault{Kind: mongotest.FaultSilentAccept, Times: 1})
		silent := dialRaw(t, srv)
		silent.sendPing(nil)
		silent.expectSilence()
		dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1})) // Times: 1 is used up
		if st := srv.Stats(); st.ConnectionsAccepted != 2 || st.Commands["ping"] != 1 {
			t.Fatalf("stats %+v; want two connections accepted, one ping answered", st)
		}
		closeAndCheck(t, srv)
	})
	t.Run("tls", func(t *testing.T) {
		srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
		remove := inject(t, srv, mongotest.Fault{Kind: mongotest.FaultSilentAccept})
		cfg := &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1"}
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 100 * time.Millisecond}, "tcp", srv.Addr(), cfg)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("TLS dial to a silent server: %v; want a timeout", err)
		}
		remove()
		dialRawTLS(t, srv, cfg).run(cmd("admin", bson.E{Key: "ping", Value: 1}))
		closeAndCheck(t, srv)
	})
}

func TestPauseAccepting(t *testing.T) {
	srv := start(t)
	srv.PauseAccepting()
	srv.PauseAccepting() // idempotent
	r := dialRaw(t, srv) // the kernel completes the connect
	id := r.sendPing(nil)
	r.expectSilence()
	if st := srv.Stats(); st.ConnectionsAccepted != 0 {
		t.Fatalf("a paused server accepted: %+v", st)
	}
	srv.ResumeAccepting()
	srv.ResumeAccepting() // idempotent
	raw, err := r.tryRead(testTimeout)
	if err != nil {
		t.Fatalf("after ResumeAccepting: %v", err)
	}
	if h, _, err := wire.DecodeReply(raw, 0); err != nil || h.ResponseTo != id {
		t.Fatalf("after ResumeAccepting: %v, %v; want the held request answered", h, err)
	}

	// Close while a connection waits.
	srv.PauseAccepting()
	held := dialRaw(t, srv)
	held.sendPing(nil)
	held.expectSilence()
	closeAndCheck(t, srv)
	if _, err := held.tryRead(5 * time.Second); err == nil {
		t.Fatal("the held connection got a reply from a closed server")
	}
}

// Close ends every wait a fault starts: a delay, a hang, a silent
// connection, a paused accept loop.
func TestFaultsEndOnClose(t *testing.T) {
	pki := testpki.New(t)
	srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
	cfg := &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1"}
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultDelay, Delay: time.Hour, Commands: []string{"ping"}})
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"buildInfo"}})
	dialRawTLS(t, srv, cfg).sendPing(nil)
	dialRawTLS(t, srv, cfg).sendPingLike("buildInfo")
	inject(t, srv, mongotest.Fault{Kind: mongotest.FaultSilentAccept, Times: 1})
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitFor(t, "the delayed ping, the hung buildInfo and the silent connection", func() bool {
		st := srv.Stats()
		return st.Commands["ping"] == 1 && st.Commands["buildInfo"] == 1 && st.ConnectionsOpen == 3
	})
	srv.PauseAccepting()
	closeAndCheck(t, srv)
}

// Faults come and go while clients run commands.
func TestFaultConcurrent(t *testing.T) {
	srv := start(t)
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	stop := make(chan struct{})
	for range 8 {
		r := dialRaw(t, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := r.sendPing(nil)
				raw, err := r.tryRead(testTimeout)
				if err != nil {
					errs <- err
					return
				}
				if h, _, err := wire.DecodeReply(raw, 0); err != nil || h.ResponseTo != id {
					errs <- errors.New("a bad reply to a ping that no fault targets")
					return
				}
			}
		}()
	}
	for range 200 {
		// Delays apply to pings; the others target a command nobody sends.
		remove := inject(t, srv, mongotest.Fault{Kind: mongotest.FaultDelay, Delay: time.Microsecond, Commands: []string{"ping"}, Times: 2})
		removeOther := inject(t, srv, mongotest.Fault{Kind: mongotest.FaultResetMidReply, Commands: []string{"find"}})
		remove()
		removeOther()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestFaultKindString(t *testing.T) {
	if s := mongotest.FaultHang.String(); s != "FaultHang" {
		t.Errorf("FaultHang.String() = %q", s)
	}
	if s := mongotest.FaultKind(42).String(); s != "FaultKind(42)" {
		t.Errorf("FaultKind(42).String() = %q", s)
	}
	if mongotest.HugeMessageLength <= mongotest.MaxMessageSize {
		t.Errorf("HugeMessageLength %d is not beyond MaxMessageSize", mongotest.HugeMessageLength)
	}
}
