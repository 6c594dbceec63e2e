package proxy_test

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
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
	p, err := proxy.New(client, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln, proxy.Mongos) }()

	// Both finds block on the server far longer than the test may take.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, BlockTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	find := mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}})
	clients := []*rawConn{dialRaw(t, ln.Addr().String()), dialRaw(t, ln.Addr().String())}
	for _, c := range clients {
		c.send(find, 0, 0)
	}
	if err := rs.Primary().WaitForFailPoint(testContext(t), 2); err != nil {
		t.Fatal(err)
	}

	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s: it waits for the round trips under way")
	}
	if err := <-served; !errors.Is(err, proxy.ErrClosed) {
		t.Errorf("Serve returned %v, want ErrClosed", err)
	}
	for i, c := range clients {
		if raw, err := wire.ReadMessage(c.nc, 0); err == nil {
			t.Errorf("client %d got a reply from a closed proxy: % x", i, raw)
		}
	}

	rs.Primary().ClearFailPoints()
	if n := cleared.Load(); n != 0 {
		t.Errorf("the client's pool was cleared %d times: Close's interruption was taken for the server's failure", n)
	}
	ctx := testContext(t)
	if _, err := client.RunCommand(ctx, "db", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatalf("the client fails after the proxy closed: %v", err)
	}
}
