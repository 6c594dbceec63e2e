package proxy

import (
	"net"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
)

func TestCursorTableForgetsUnusedCursors(t *testing.T) {
	synctest.Test(t, testCursorTableForgets)
}

func testCursorTableForgets(t *testing.T) {
	const timeout = 10 * time.Minute
	tab := newCursorTable(timeout)
	used := tab.add(cursorEntry{server: "a:1", id: 11})
	unused := tab.add(cursorEntry{server: "b:1", id: 22, longPoll: true})
	// Used all along, for three timeouts: kept; the other: forgotten.
	for start := time.Now(); time.Since(start) < 3*timeout; time.Sleep(timeout / 10) {
		if _, ok := tab.get(used); !ok {
			t.Fatal("a cursor in use was forgotten")
		}
	}
	if _, ok := tab.get(unused); ok {
		t.Fatal("a cursor unused for three timeouts is still mapped")
	}
	if c, ok := tab.get(used); !ok || c.server != "a:1" || c.id != 11 {
		t.Fatalf("the used cursor: %+v, %v", c, ok)
	}
	tab.remove(used)
	if tab.len() != 0 {
		t.Fatalf("%d cursors left", tab.len())
	}
}

func TestPinTable(t *testing.T) { synctest.Test(t, testPinTable) }

func testPinTable(t *testing.T) {
	tab := newPinTable()
	lsid := []byte("session-a")
	tab.put(lsid, 3, "m1:1")
	if s, ok := tab.get(lsid, 3); !ok || s != "m1:1" {
		t.Fatalf("get = %q, %v", s, ok)
	}
	if _, ok := tab.get(lsid, 4); ok {
		t.Fatal("another transaction of the session found the pin")
	}
	tab.remove(lsid)
	if tab.len() != 0 {
		t.Fatal("the pin is still there")
	}
	// A pin unused past the lifetime of a transaction is forgotten; one in
	// use is kept.
	tab.put([]byte("kept"), 1, "m1:1")
	tab.put([]byte("dropped"), 1, "m2:1")
	for range 5 {
		time.Sleep(pinLifetime / 2)
		if _, ok := tab.get([]byte("kept"), 1); !ok {
			t.Fatal("a pin in use was forgotten")
		}
	}
	if _, ok := tab.get([]byte("dropped"), 1); ok {
		t.Fatal("an unused pin outlived two lifetimes")
	}
}

// The getMores of awaitData cursors (change streams, tailable cursors)
// are capped apart: beyond MaxLongPolls, an overload error; other
// operations go on.
func TestLongPollsCapped(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	client, err := mongopool.NewClient(rs.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := New(client, Config{MaxLongPolls: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln, Mongos)
	defer p.Close()
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	send := func(nc net.Conn, doc bson.D) {
		body, _ := bson.Marshal(doc)
		msg, _ := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: body})
		if _, err := nc.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	read := func(nc net.Conn) bson.Raw {
		raw, err := wire.ReadMessage(nc, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, m, err := wire.DecodeMsg(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m.Body
	}
	a := dial()
	send(a, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}, bson.D{}, bson.D{}}}, {Key: "$db", Value: "db"}})
	read(a)
	var ids []int64
	for range 2 {
		send(a, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 0}, {Key: "$db", Value: "db"}})
		ids = append(ids, read(a).Lookup("cursor", "id").Int64())
	}
	// The test server has no tailable cursors: mark these as a change
	// stream's would be.
	for _, id := range ids {
		c, _ := p.cursors.get(id)
		c.longPoll = true
		s := p.cursors.shard(id)
		s.mu.Lock()
		s.cur[id] = c
		s.mu.Unlock()
	}
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"getMore"}, BlockTime: 300 * time.Millisecond, Times: 1}); err != nil {
		t.Fatal(err)
	}
	b := dial()
	send(b, bson.D{{Key: "getMore", Value: ids[0]}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})
	deadline := time.Now().Add(10 * time.Second)
	for p.longPolls.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first getMore never started")
		}
		time.Sleep(time.Millisecond)
	}
	send(a, bson.D{{Key: "getMore", Value: ids[1]}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})
	refused := read(a)
	if refused.Lookup("code").Int32() != codeOverloaded {
		t.Fatalf("a second long poll beyond MaxLongPolls 1: %v, want an overload error", refused)
	}
	send(a, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	if n := read(a).Lookup("n").Int32(); n != 3 {
		t.Fatalf("count during the long poll = %d", n)
	}
	if got := read(b); got.Lookup("ok").Double() != 1 {
		t.Fatalf("the long poll: %v", got)
	}
	if p.longPolls.Load() != 0 {
		t.Fatalf("%d long polls counted after they ended", p.longPolls.Load())
	}
	// The long poll (300ms, blocked) is no operation's latency: the
	// insert, the finds and the count are, all much quicker.
	st := p.Stats()
	if st.Latency.Count != uint64(st.Operations)-1 || st.Latency.Quantile(1) >= 300*time.Millisecond {
		t.Errorf("Latency: %d samples, the longest %v, for %d operations relayed, one of them a long poll of 300ms",
			st.Latency.Count, st.Latency.Quantile(1), st.Operations)
	}
}

func TestParsePersona(t *testing.T) {
	for in, want := range map[string]Persona{"": Mongos, "mongos": Mongos, "MONGOS": Mongos, "loadBalancer": LoadBalancer, "LB": LoadBalancer, "load-balancer": LoadBalancer} {
		if got, err := ParsePersona(in); err != nil || got != want {
			t.Errorf("ParsePersona(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParsePersona("router"); err == nil {
		t.Error("ParsePersona(router) accepted")
	}
}

// TestLBHelloDoesNotWaitForAConnection: behind a load balancer, once the
// hello state is known, a hello whose state is due to be learnt again gets
// the last one at once, while the operations hold every connection of the
// pool (here its only one): the learning waits in the background, and ends
// with the proxy.
func TestLBHelloDoesNotWaitForAConnection(t *testing.T) {
	s, err := mongotest.Start(mongotest.WithLoadBalanced(bson.NewObjectID()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client, err := mongopool.NewClient(s.URI() + "?loadBalanced=true&maxPoolSize=1")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := New(client, Config{QueueTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := t.Context()
	first, err := p.helloNow(ctx)
	if err != nil || first.maxWire == 0 {
		t.Fatalf("the first hello state: %+v, %v", first, err)
	}
	held, err := client.Conn(ctx) // the pool's only connection, in use
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.lbLearnt = time.Now().Add(-2 * lbRelearn) // due to be learnt again
	p.mu.Unlock()
	done := make(chan *helloState, 1)
	go func() {
		st, _ := p.helloNow(ctx)
		done <- st
	}()
	select {
	case st := <-done:
		if st != first {
			t.Errorf("the hello state while relearning: %+v, want the last one %+v", st, first)
		}
	case <-time.After(10 * time.Second): // before, it waited for the connection: QueueTimeout, an hour
		t.Fatal("a hello waited for the connection the operations hold")
	}
	held.Close() // the background learning gets it now
}

// The commands that may leave a cursor open hold their connection behind a
// load balancer; the others, and a single batch, do not.
func TestOpensCursor(t *testing.T) {
	for _, c := range []struct {
		cmd  bson.D
		want bool
	}{
		{bson.D{{Key: "find", Value: "c"}}, true},
		{bson.D{{Key: "find", Value: "c"}, {Key: "singleBatch", Value: true}}, false},
		{bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}}, true},
		{bson.D{{Key: "listCollections", Value: 1}}, true},
		{bson.D{{Key: "listIndexes", Value: "c"}}, true},
		{bson.D{{Key: "listSearchIndexes", Value: "c"}}, true},
		{bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: bson.A{}}, {Key: "nsInfo", Value: bson.A{}}}, true},
		{bson.D{{Key: "checkMetadataConsistency", Value: 1}}, true},
		{bson.D{{Key: "insert", Value: "c"}}, false},
		{bson.D{{Key: "count", Value: "c"}}, false},
	} {
		body, err := bson.Marshal(append(c.cmd, bson.E{Key: "$db", Value: "admin"}))
		if err != nil {
			t.Fatal(err)
		}
		req, err := parseRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := opensCursor(&req); got != c.want {
			t.Errorf("%s: opensCursor %v, want %v", c.cmd[0].Key, got, c.want)
		}
	}
}
