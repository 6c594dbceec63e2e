package mongopool_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
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
