package proxy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/wire"
)

// TestCloseInterruptsRoundTrips: Close ends a round trip under way at once
// rather than when its server answers, and leaves the client it was given
// as it was: the server still selectable, its pool not cleared (the round
// trip's failure is Close's doing, not the server's).
func TestCloseInterruptsRoundTrips(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var cleared atomic.Int32
	client, err := mongopool.NewClient(rs.URI(), mongopool.WithPoolOptions(pool.WithEventHandler(func(e pool.Event) {
		if e.Type == pool.PoolCleared {
			cleared.Add(1)
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, addr, served := serveProxy(t, client, proxy.Config{})

	// Both finds block on the server far longer than the test may take.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, BlockTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clients := []*rawConn{dialRaw(t, addr), dialRaw(t, addr)}
	for _, c := range clients {
		c.send(blockedFind(t), 0, 0)
	}
	if err := rs.Primary().WaitForFailPoint(testContext(t), 2); err != nil {
		t.Fatal(err)
	}
	closePromptly(t, p, served, clients)

	rs.Primary().ClearFailPoints()
	if n := cleared.Load(); n != 0 {
		t.Errorf("the client's pool was cleared %d times: Close's interruption was taken for the server's failure", n)
	}
	if _, err := client.RunCommand(testContext(t), "db", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatalf("the client fails after the proxy closed: %v", err)
	}
}

// TestCloseInterruptsQueueWaits: Close ends an operation's wait for a
// connection at once, rather than at the end of the wait.
func TestCloseInterruptsQueueWaits(t *testing.T) {
	rs := startReplicaSet(t, 1)
	client, err := mongopool.NewClient(rs.URI() + "&maxPoolSize=1")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, addr, served := serveProxy(t, client, proxy.Config{QueueTimeout: time.Hour})

	// The pool's one connection is held here, for as long as the test.
	held, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go client.Do(testContext(t), func(*connection.Conn) error {
		close(held)
		<-release
		return nil
	})
	<-held
	c := dialRaw(t, addr)
	c.send(blockedFind(t), 0, 0)
	for deadline := time.Now().Add(10 * time.Second); p.Stats().Queued != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the find is not waiting for a connection: %d queued", p.Stats().Queued)
		}
		time.Sleep(time.Millisecond)
	}
	closePromptly(t, p, served, []*rawConn{c})
}

// serveProxy serves a proxy over client, as a mongos on a loopback
// listener, and returns it, its address and the channel of Serve's result.
func serveProxy(t *testing.T, client *mongopool.Client, cfg proxy.Config) (*proxy.Proxy, string, <-chan error) {
	t.Helper()
	p, err := proxy.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, served := serve(t, p, proxy.Mongos)
	return p, addr, served
}

func blockedFind(t *testing.T) bson.Raw {
	return mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}})
}

// closePromptly closes p, which must return within 10s, and checks that
// none of clients, whose operations were under way, got a reply.
func closePromptly(t *testing.T, p *proxy.Proxy, served <-chan error, clients []*rawConn) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s: it waits for the operations under way")
	}
	if err := <-served; !errors.Is(err, proxy.ErrClosed) {
		t.Errorf("Serve returned %v, want ErrClosed", err)
	}
	for i, c := range clients {
		if raw, err := wire.ReadMessage(c.nc, 0); err == nil {
			t.Errorf("client %d got a reply from a closed proxy: % x", i, raw)
		}
	}
}

// TestDrainServesARequestAlreadySent: a request a client sent just as the
// proxy began draining (bytes in the socket, not yet read) is served
// before the connection closes, not lost: its client would see the
// connection close under its request, a network error (the rolling
// restart's test once had an insert fail so).
func TestDrainServesARequestAlreadySent(t *testing.T) {
	rs := startReplicaSet(t, 1)
	client, err := mongopool.NewClient(rs.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 20 {
		p, addr, served := serveProxy(t, client, proxy.Config{})
		c := dialRaw(t, addr)
		c.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})) // idle now
		c.send(mustMarshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}, {Key: "$db", Value: "db"}}), 0, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		shut := make(chan error, 1)
		go func() { shut <- p.Shutdown(ctx) }()
		raw, err := wire.ReadMessage(c.nc, 0)
		if err != nil {
			t.Fatalf("drain %d: the insert sent before it got no reply: %v", i, err)
		}
		if _, m, err := wire.DecodeMsg(raw); err != nil || m.Body.Lookup("ok").Double() != 1 {
			t.Fatalf("drain %d: the insert's reply: %v %v", i, err, m)
		}
		if err := <-shut; err != nil {
			t.Fatalf("drain %d: Shutdown: %v", i, err)
		}
		cancel()
		<-served
	}
}
