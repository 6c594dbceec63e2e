package proxy_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// TestClientThatSendsAhead: a client sends its next request while the
// proxy still serves the one before (it pipelines). The proxy writes a
// reply as the read of the next request begins, and that read waits for
// bytes that come after the reply: the request that came before must not
// be left unread. Both replies come, in order.
func TestClientThatSendsAhead(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	c := dialRaw(t, addr)
	ping := mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	count := mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	for range 3 { // replies the proxy keeps for the next read
		if c.roundTrip(ping).Lookup("ok").Double() != 1 {
			t.Fatal("ping failed")
		}
	}
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, BlockTime: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	first := c.send(count, 0, 0)
	// The count is under way upstream when the ping comes.
	deadline := time.Now().Add(10 * time.Second)
	for inUse(p) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the count did not reach the upstream within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	second := c.send(ping, 0, 0)
	for _, want := range []int32{first, second} {
		h, _, body, _ := c.read() // fails the test past dialRaw's deadline
		if h.ResponseTo != want || body.Lookup("ok").Double() != 1 {
			t.Fatalf("a reply to %d (%s), want one to %d", h.ResponseTo, body, want)
		}
	}
	// And the connection goes on.
	if c.roundTrip(ping).Lookup("ok").Double() != 1 {
		t.Fatal("ping failed")
	}
	// Its replies are written at once from now on: it did not wait.
	if n := p.SendingAhead(); n != 1 {
		t.Fatalf("%d connections found sending ahead, want 1", n)
	}
	// A client that sends two requests in one write is found too.
	c2 := dialRaw(t, addr)
	c2.roundTrip(ping)
	two := append(wireMsg(t, ping), wireMsg(t, ping)...)
	if _, err := c2.nc.Write(two); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, body, _ := c2.read(); body.Lookup("ok").Double() != 1 {
			t.Fatalf("a reply %s", body)
		}
	}
	if n := p.SendingAhead(); n != 2 {
		t.Fatalf("%d connections found sending ahead, want 2", n)
	}
}

func inUse(p *proxy.Proxy) int {
	n := 0
	for _, pl := range p.Upstream("").Pools() {
		n += pl.Stats().InUse
	}
	return n
}
