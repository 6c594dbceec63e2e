package connection_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/wire"
)

// received is what a scriptServer saw of one message.
type received struct {
	op    wire.OpCode // as sent: OP_COMPRESSED for a compressed message
	name  string      // the command
	size  int         // the message's size as sent
	flags wire.Flag   // of the OP_MSG
}

// scriptServer is a raw wire-protocol server whose answers the test writes
// byte for byte: answer gets the index of the message on its connection
// (0 for the hello), its requestID and its command, and returns the bytes to
// send back (nil: nothing). It records every message it receives.
type scriptServer struct {
	l      net.Listener
	wg     sync.WaitGroup
	answer func(n int, requestID int32, cmd bson.Raw) []byte

	mu   sync.Mutex
	seen []received
}

func startScript(t *testing.T, answer func(n int, requestID int32, cmd bson.Raw) []byte) *scriptServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptServer{l: l, answer: answer}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); defer c.Close(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return s
}

func (s *scriptServer) serve(c net.Conn) {
	for n := 0; ; n++ {
		msg, err := wire.ReadMessage(c, 0)
		if err != nil {
			return
		}
		h, m, err := wire.DecodeReply(msg, 0)
		if err != nil {
			return
		}
		name := ""
		if e, err := m.Body.IndexErr(0); err == nil {
			name = e.Key()
		}
		s.mu.Lock()
		s.seen = append(s.seen, received{op: wire.OpCode(binary.LittleEndian.Uint32(msg[12:])), name: name, size: len(msg), flags: m.Flags})
		s.mu.Unlock()
		if out := s.answer(n, h.RequestID, m.Body); out != nil {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

// commands returns the names of the commands received, in order.
func (s *scriptServer) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, r := range s.seen {
		names = append(names, r.name)
	}
	return names
}

func (s *scriptServer) last() received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// opMsg encodes body as an OP_MSG answering responseTo.
func opMsg(t testing.TB, responseTo int32, body bson.Raw) []byte {
	out, err := wire.AppendMsg(nil, wire.NextRequestID(), responseTo, &wire.Msg{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helloReply is a hello reply with extra fields.
func helloReply(extra ...bson.E) bson.Raw {
	d := bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: int32(21)}}
	return mustRaw(append(append(d, extra...), bson.E{Key: "ok", Value: 1.0}))
}

// afterHello is an answer for startScript: the hello gets helloReply(),
// every later command the bytes then returns for its requestID (nil: no
// answer).
func afterHello(t testing.TB, then func(requestID int32) []byte) func(n int, requestID int32, cmd bson.Raw) []byte {
	return func(n int, id int32, _ bson.Raw) []byte {
		if n == 0 {
			return opMsg(t, id, helloReply())
		}
		return then(id)
	}
}

func mustRaw(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

var ping = mustRaw(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})

func dial(t *testing.T, addr string, socketTimeout time.Duration) *connection.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connection.Dial(ctx, &connection.Config{Address: addr, SocketTimeout: socketTimeout}, connection.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServerErrorLeavesConnectionUsable(t *testing.T) {
	s := startScript(t, afterHello(t, func(id int32) []byte {
		return opMsg(t, id, mustRaw(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 8000}, {Key: "codeName", Value: "AtlasError"}, {Key: "errmsg", Value: "nope"}}))
	}))
	c := dial(t, s.l.Addr().String(), 0)
	_, err := c.RoundTrip(context.Background(), ping)
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 8000 || c.Err() != nil {
		t.Fatalf("server error: %v, connection error %v", err, c.Err())
	}
}

func TestWrongResponseToBreaksConnection(t *testing.T) {
	s := startScript(t, afterHello(t, func(id int32) []byte { return opMsg(t, id+1, mustRaw(bson.D{{Key: "ok", Value: 1}})) }))
	c := dial(t, s.l.Addr().String(), 0)
	_, err := c.RoundTrip(context.Background(), ping)
	if !errors.Is(err, wire.ErrProtocol) || c.Err() == nil {
		t.Fatalf("wrong responseTo: %v, connection error %v", err, c.Err())
	}
	if _, err := c.RoundTrip(context.Background(), ping); err == nil {
		t.Fatal("a broken connection ran another command")
	}
}

// A server that never answers: the context, socketTimeoutMS and Close each end
// the wait, and the connection is broken after.
func TestHangingServer(t *testing.T) {
	s := startScript(t, afterHello(t, func(int32) []byte { return nil }))
	addr := s.l.Addr().String()

	c := dial(t, addr, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.RoundTrip(ctx, ping); !errors.Is(err, context.DeadlineExceeded) || c.Err() == nil {
		t.Fatalf("context deadline: %v, connection error %v", err, c.Err())
	}

	c = dial(t, addr, 50*time.Millisecond)
	var ne net.Error
	if _, err := c.RoundTrip(context.Background(), ping); !errors.As(err, &ne) || !ne.Timeout() || c.Err() == nil {
		t.Fatalf("socket timeout: %v", err)
	}

	// Close once the server holds the command: the client is reading the
	// reply, or about to.
	held := make(chan struct{}, 1)
	s = startScript(t, afterHello(t, func(int32) []byte { held <- struct{}{}; return nil }))
	c = dial(t, s.l.Addr().String(), 0)
	done := make(chan error, 1)
	go func() { _, err := c.RoundTrip(context.Background(), ping); done <- err }()
	wait := time.NewTimer(10 * time.Second)
	defer wait.Stop()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the command ended before the server got it: %v", err)
	case <-wait.C:
		t.Fatal("the server never got the command")
	}
	c.Close()
	select {
	case err := <-done:
		if err == nil || c.Err() == nil {
			t.Fatalf("Close during a command: %v", err)
		}
	case <-wait.C:
		t.Fatal("Close did not end the command")
	}
}

// Send sends a command with moreToCome set and reads no reply (an
// unacknowledged write); the connection stays in step for the next
// command.
func TestSendWithoutReply(t *testing.T) {
	s := startScript(t, func(n int, id int32, cmd bson.Raw) []byte {
		switch {
		case n == 0:
			return opMsg(t, id, helloReply())
		case commandNameOf(cmd) == "ping":
			return opMsg(t, id, mustRaw(bson.D{{Key: "ok", Value: 1.0}}))
		}
		return nil // the insert: no reply
	})
	c := dial(t, s.l.Addr().String(), 0)
	insert := mustRaw(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}, {Key: "$db", Value: "db"}})
	if err := c.Send(context.Background(), insert); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RoundTrip(context.Background(), ping); err != nil {
		t.Fatalf("the command after Send: %v", err)
	}
	s.mu.Lock()
	seen := append([]received(nil), s.seen...)
	s.mu.Unlock()
	if len(seen) != 3 || seen[1].name != "insert" || seen[1].flags&wire.MoreToCome == 0 || seen[2].flags&wire.MoreToCome != 0 {
		t.Errorf("the server saw %+v; want the hello, the insert with moreToCome, the ping without", seen)
	}
}

// A command with a deadline, then one without after that deadline has
// passed: the socket's deadline is cleared, not left to fail the second.
func TestDeadlineClearedForACommandWithout(t *testing.T) {
	s := startScript(t, afterHello(t, func(id int32) []byte { return opMsg(t, id, mustRaw(bson.D{{Key: "ok", Value: 1}})) }))
	c := dial(t, s.l.Addr().String(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(60 * time.Millisecond) // past the first command's deadline
	for range 3 {
		if _, err := c.RoundTrip(context.Background(), ping); err != nil {
			t.Fatalf("a command without a deadline after one with: %v", err)
		}
	}
	// A canceled command's interruption does not outlive it either.
	ctx, cancel = context.WithCancel(context.Background())
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := c.RoundTrip(context.Background(), ping); err != nil {
		t.Fatalf("a command after a canceled context's: %v", err)
	}
}

func TestBusyPollerOnAConnection(t *testing.T) {
	bp := connection.NewBusyPoller(connection.MaxBusyPoll)
	if bp.Budget() == 0 {
		t.Skip("this machine does not poll (one CPU, or not Linux)")
	}
	connection.LongPoll(bp) // each poll here ends with its reply
	s := startScript(t, func(n int, id int32, cmd bson.Raw) []byte {
		if n == 0 {
			return opMsg(t, id, helloReply())
		}
		return opMsg(t, id, mustRaw(bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}, {Key: "nextBatch", Value: bson.A{}}}}, {Key: "ok", Value: 1.0}}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connection.Dial(ctx, &connection.Config{Address: s.l.Addr().String(), BusyPoller: bp}, connection.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	polls0, hits0 := bp.Stats()
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatal(err)
	}
	polls, hits := bp.Stats()
	if polls != polls0+1 || hits != hits0+1 {
		t.Errorf("a ping: %d polls and %d hits more, want 1 and 1", polls-polls0, hits-hits0)
	}
	// A getMore may wait for data for seconds: never polled for.
	getMore := mustRaw(bson.D{{Key: "getMore", Value: int64(7)}, {Key: "collection", Value: "c"}, {Key: "$db", Value: "db"}})
	if _, err := c.RoundTrip(ctx, getMore); err != nil {
		t.Fatal(err)
	}
	if p, _ := bp.Stats(); p != polls {
		t.Errorf("a getMore was polled for (%d polls more)", p-polls)
	}
	// Nor does a getMore count as an awaited reply: the next ping polls.
	if _, err := c.RoundTrip(ctx, ping); err != nil {
		t.Fatal(err)
	}
	if p, _ := bp.Stats(); p != polls+1 {
		t.Errorf("the ping after a getMore: %d polls more, want 1", p-polls)
	}
}
