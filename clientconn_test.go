package mongopool_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// serverConnectionID returns the server's id of the connection a command
// ran on (connectionStatus does not say it; whatsmyuri's you does not
// either, so the hello's connectionId is asked for).
func serverConnectionID(t *testing.T, reply bson.Raw) int64 {
	t.Helper()
	id, ok := reply.Lookup("connectionId").AsInt64OK()
	if !ok {
		t.Fatalf("hello reply without connectionId: %s", reply)
	}
	return id
}

// A Conn keeps one connection for its commands until Close: they all run on
// it, another Conn gets another, and Close gives it back to the pool.
func TestClientConn(t *testing.T) {
	s := server(t)
	c := connectClient(t, s.URI())
	ctx := ctx(t)
	hello := bson.D{{Key: "hello", Value: 1}}
	a, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids [2][]int64
	for range 3 {
		for i, cn := range []*mongopool.Conn{a, b} {
			reply, err := cn.RunCommand(ctx, "admin", hello)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = append(ids[i], serverConnectionID(t, reply))
		}
	}
	for i := range ids {
		if ids[i][0] != ids[i][1] || ids[i][1] != ids[i][2] {
			t.Errorf("the commands of conn %d ran on connections %v, want one", i, ids[i])
		}
	}
	if ids[0][0] == ids[1][0] {
		t.Errorf("two Conns share connection %d", ids[0][0])
	}
	if a.Address() != s.Addr() {
		t.Errorf("Address %q, want %q", a.Address(), s.Addr())
	}
	if st := c.Pools()[0].Stats(); st.InUse != 2 {
		t.Errorf("%d connections in use with two Conns open, want 2", st.InUse)
	}
	// A command error is the command's, and the connection stays.
	_, err = a.RunCommand(ctx, "admin", bson.D{{Key: "noSuchCommand", Value: 1}})
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 59 {
		t.Errorf("an unknown command: %v, want CommandNotFound", err)
	}
	if reply, err := a.RunCommand(ctx, "admin", hello); err != nil || serverConnectionID(t, reply) != ids[0][0] {
		t.Errorf("after a command error: %v, %v", reply, err)
	}
	for _, cn := range []*mongopool.Conn{a, b} {
		if err := cn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Pools()[0].Stats(); st.InUse != 0 || st.Available != 2 {
		t.Errorf("after Close: %d in use, %d idle; want 0 and 2", st.InUse, st.Available)
	}
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := a.RunCommand(ctx, "admin", hello); !errors.Is(err, mongopool.ErrConnClosed) {
		t.Errorf("a command after Close: %v, want ErrConnClosed", err)
	}
}

// A Conn is an operation under way: Shutdown waits for its Close, and a
// closed client gives none.
func TestClientConnAndShutdown(t *testing.T) {
	s := server(t)
	c := connectClient(t, s.URI())
	cn, err := c.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(context.Background()) }()
	waitFor(t, func() string { return "Shutdown to turn new operations away" }, func() bool {
		_, err := c.RunCommand(ctx(t), "admin", ping)
		return errors.Is(err, topology.ErrClosed)
	})
	if _, err := c.Conn(ctx(t)); !errors.Is(err, topology.ErrClosed) {
		t.Fatalf("Conn during Shutdown: %v, want topology.ErrClosed", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a Conn open: %v", err)
	default:
	}
	if _, err := cn.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Errorf("the open Conn during Shutdown: %v", err)
	}
	cn.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx(t).Done():
		t.Fatal("Shutdown did not return after the Conn's Close")
	}
	if _, err := c.Conn(ctx(t)); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("Conn of a closed client: %v, want topology.ErrClosed", err)
	}
}

// Conn.Do hands fn the Conn's own connection, every time: a cursor opened
// by a message relayed through it is read to its end there, as a load
// balancer's cursors must be. A network error in fn goes through SDAM (the
// server is marked Unknown, its pool cleared) and breaks the Conn; after
// Close, Do refuses.
func TestClientConnDo(t *testing.T) {
	s := server(t)
	c := connectClient(t, s.URI())
	ctx := ctx(t)
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}}}); err != nil {
		t.Fatal(err)
	}
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var conns []*connection.Conn
	run := func(cmd bson.D) bson.Raw {
		t.Helper()
		var reply bson.Raw
		err := cn.Do(ctx, func(conn *connection.Conn) error {
			conns = append(conns, conn)
			var err error
			reply, err = conn.RoundTripMsg(ctx, mustRaw(t, cmd), nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	reply := run(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})
	id := reply.Lookup("cursor", "id").Int64()
	for range 10 {
		if id == 0 {
			break
		}
		reply = run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})
		id = reply.Lookup("cursor", "id").Int64()
	}
	if len(conns) < 3 {
		t.Fatalf("%d commands for a cursor of 3 documents in batches of 1", len(conns))
	}
	for _, conn := range conns[1:] {
		if conn != conns[0] {
			t.Fatal("Do gave fn another connection")
		}
	}
	// A network error: the connection breaks, SDAM hears of it.
	cleared := c.Pools()[0].Stats().Generation
	err = cn.Do(ctx, func(conn *connection.Conn) error {
		conn.Close()
		_, err := conn.RoundTripMsg(ctx, mustRaw(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}), nil)
		return err
	})
	if err == nil {
		t.Fatal("a round trip on a closed connection succeeded")
	}
	if got := c.Pools()[0].Stats().Generation; got != cleared+1 {
		t.Errorf("the pool was cleared %d times after a network error, want %d", got, cleared+1)
	}
	if err := cn.Do(ctx, func(*connection.Conn) error { t.Error("fn called on a broken connection"); return nil }); err == nil {
		t.Error("Do on a broken connection: no error")
	}
	cn.Close()
	if err := cn.Do(ctx, func(*connection.Conn) error { return nil }); !errors.Is(err, mongopool.ErrConnClosed) {
		t.Errorf("Do after Close: %v, want ErrConnClosed", err)
	}
}
