package connection_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/wire"
)

// rawServer answers the hello, then treats every later command as reply
// says: it returns the reply's body and responseTo, or nil to never answer.
type rawServer struct {
	l     net.Listener
	wg    sync.WaitGroup
	reply func(requestID int32) (bson.Raw, int32)
}

func startRaw(t *testing.T, reply func(requestID int32) (bson.Raw, int32)) *rawServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{l: l, reply: reply}
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

func (s *rawServer) serve(c net.Conn) {
	hello := true
	for {
		msg, err := wire.ReadMessage(c, 0)
		if err != nil {
			return
		}
		h, _, err := wire.DecodeReply(msg, 0)
		if err != nil {
			return
		}
		body, responseTo := mustRaw(bson.D{{Key: "ok", Value: 1}, {Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: 21}}), h.RequestID
		if !hello {
			if body, responseTo = s.reply(h.RequestID); body == nil {
				continue // never answer
			}
		}
		hello = false
		out, _ := wire.AppendMsg(nil, wire.NextRequestID(), responseTo, &wire.Msg{Body: body})
		if wire.WriteMessage(c, out) != nil {
			return
		}
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
	s := startRaw(t, func(id int32) (bson.Raw, int32) {
		return mustRaw(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 8000}, {Key: "codeName", Value: "AtlasError"}, {Key: "errmsg", Value: "nope"}}), id
	})
	c := dial(t, s.l.Addr().String(), 0)
	_, err := c.RoundTrip(context.Background(), ping)
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 8000 || c.Err() != nil {
		t.Fatalf("server error: %v, connection error %v", err, c.Err())
	}
}

func TestWrongResponseToBreaksConnection(t *testing.T) {
	s := startRaw(t, func(id int32) (bson.Raw, int32) { return mustRaw(bson.D{{Key: "ok", Value: 1}}), id + 1 })
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
	s := startRaw(t, func(int32) (bson.Raw, int32) { return nil, 0 })
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
	s = startRaw(t, func(int32) (bson.Raw, int32) { held <- struct{}{}; return nil, 0 })
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
