package proxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// roundRobin is a layer-4 load balancer for the tests: each connection it
// accepts goes to the next backend in turn, its bytes copied both ways.
type roundRobin struct {
	ln       net.Listener
	backends []string
	wg       sync.WaitGroup

	mu    sync.Mutex // protects following fields
	next  int
	conns map[net.Conn]struct{}
}

// startLoadBalanced starts n test servers that present mongoses behind a
// load balancer (each its own data) and a round-robin load balancer in
// front of them; it returns the balancer's address and the servers.
func startLoadBalanced(t *testing.T, n int) (string, []*mongotest.Server) {
	t.Helper()
	var servers []*mongotest.Server
	var addrs []string
	for range n {
		s, err := mongotest.Start(mongotest.WithLoadBalanced(bson.NewObjectID()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rr := &roundRobin{ln: ln, backends: addrs, conns: map[net.Conn]struct{}{}}
	rr.wg.Add(1)
	go rr.serve()
	t.Cleanup(rr.close)
	return ln.Addr().String(), servers
}

func (rr *roundRobin) serve() {
	defer rr.wg.Done()
	for {
		c, err := rr.ln.Accept()
		if err != nil {
			return
		}
		rr.mu.Lock()
		if rr.conns == nil {
			rr.mu.Unlock()
			c.Close()
			return
		}
		backend := rr.backends[rr.next%len(rr.backends)]
		rr.next++
		rr.conns[c] = struct{}{}
		rr.mu.Unlock()
		rr.wg.Add(1)
		go rr.relay(c, backend)
	}
}

func (rr *roundRobin) relay(c net.Conn, backend string) {
	defer rr.wg.Done()
	defer func() {
		rr.mu.Lock()
		delete(rr.conns, c)
		rr.mu.Unlock()
		c.Close()
	}()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(b, c); b.Close(); done <- struct{}{} }()
	go func() { io.Copy(c, b); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}

func (rr *roundRobin) close() {
	rr.ln.Close()
	rr.mu.Lock()
	for c := range rr.conns {
		c.Close()
	}
	rr.conns = nil
	rr.mu.Unlock()
	rr.wg.Wait()
}

// lbURI is the connection string of the load balancer at addr.
func lbURI(addr string) string { return "mongodb://" + addr + "/?loadBalanced=true" }

// startTxn starts a transaction over c, by hand: an insert of {_id: 1} into
// db.t with a session of its own, txnNumber 1. It returns the session's
// lsid.
func startTxn(t *testing.T, c *rawConn) bson.D {
	t.Helper()
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	insert := bson.D{{Key: "insert", Value: "t"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "startTransaction", Value: true},
		{Key: "autocommit", Value: false}, {Key: "$db", Value: "db"}}
	if reply := c.roundTrip(mustMarshal(t, insert)); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("the transaction's insert: %v", reply)
	}
	return lsid
}

// seedBackends inserts into each server of a load-balanced deployment
// docs documents {_id: i, b: the server's index}, straight: each has its
// own data, so that a document tells which server sent it.
func seedBackends(t *testing.T, servers []*mongotest.Server, docs int) {
	t.Helper()
	ctx := testContext(t)
	for b, s := range servers {
		c := driverClient(t, s.URI()+"?loadBalanced=true")
		var ds []any
		for i := range docs {
			ds = append(ds, bson.D{{Key: "_id", Value: i}, {Key: "b", Value: b}})
		}
		if _, err := c.Database("db").Collection("c").InsertMany(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadBalancedUpstreamHoldsCursors: behind a round-robin load balancer
// of two mongoses with data of their own, each open cursor holds its
// upstream connection: a second cursor opened while the first is open gets
// another connection (the other mongos), and each cursor's getMores reach
// its own mongos, interleaved, to their ends; a killCursors reaches the
// cursor's mongos; an exhausted or killed cursor gives its connection back.
func TestLoadBalancedUpstreamHoldsCursors(t *testing.T) {
	lb, servers := startLoadBalanced(t, 2)
	seedBackends(t, servers, 10)
	p, addr := startProxy(t, lbURI(lb), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	coll := driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c")

	curA, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	curB, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().PinnedConns; n != 2 {
		t.Fatalf("%d upstream connections held with two cursors open, want 2", n)
	}
	from := [2]map[int32]int{{}, {}}
	for more := true; more; {
		more = false
		for i, cur := range []*mongo.Cursor{curA, curB} {
			if cur.Next(ctx) {
				more = true
				from[i][cur.Current.Lookup("b").Int32()]++
			}
		}
	}
	for i, cur := range []*mongo.Cursor{curA, curB} {
		if err := cur.Err(); err != nil {
			t.Fatalf("cursor %d: %v", i, err)
		}
		if len(from[i]) != 1 {
			t.Fatalf("cursor %d got documents from the mongoses %v, want one mongos", i, from[i])
		}
	}
	for b, n := range from[0] {
		if from[1][b] != 0 || n != 10 {
			t.Fatalf("cursors from the mongoses %v and %v: want all 10 documents of each, from two mongoses", from[0], from[1])
		}
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Fatalf("%d upstream connections held after both cursors' ends, want 0", n)
	}

	// Three cursors open at once, then each killed: killCursors goes over
	// the cursor's connection, to its mongos, which finds it.
	db := driverClient(t, "mongodb://"+addr+"/").Database("db")
	var ids []int64
	for range 3 {
		reply, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, reply.Lookup("cursor", "id").Int64())
	}
	if n := p.Stats().PinnedConns; n != 3 {
		t.Fatalf("%d upstream connections held with three cursors open, want 3", n)
	}
	for _, id := range ids {
		reply, err := db.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if killed, _ := reply.Lookup("cursorsKilled").Array().Values(); len(killed) != 1 {
			t.Errorf("killCursors of cursor %d: %v, want it killed", id, reply)
		}
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Fatalf("%d upstream connections held after the cursors were killed, want 0", n)
	}
}

// TestLoadBalancedUpstreamHoldsTransactions: a transaction through the
// proxy to a load-balanced upstream holds one upstream connection from its
// first command to its commit or abort, so that all its commands reach one
// mongos, even with a cursor opened in between (outside the transaction,
// on a connection of its own): the committed documents are all on one of
// the two mongoses, the aborted ones on neither.
func TestLoadBalancedUpstreamHoldsTransactions(t *testing.T) {
	lb, servers := startLoadBalanced(t, 2)
	seedBackends(t, servers, 10)
	p, addr := startProxy(t, lbURI(lb), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("db").Collection("t")
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	held := -1
	if _, err := sess.WithTransaction(ctx, func(tctx context.Context) (any, error) {
		for i := range 3 {
			if _, err := coll.InsertOne(tctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
			if i == 0 {
				// Outside the transaction: it holds a connection of
				// its own, the one the insert used if it held none.
				cur, err := c.Database("db").Collection("c").Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
				if err != nil {
					return nil, err
				}
				defer cur.Close(ctx)
			}
		}
		held = p.Stats().PinnedConns
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if held != 2 {
		t.Errorf("%d upstream connections held within the transaction with a cursor open, want 2", held)
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Errorf("%d upstream connections held after the commit, want 0", n)
	}
	abort := errors.New("abort")
	if _, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 10}}); err != nil {
			return nil, err
		}
		return nil, abort
	}); !errors.Is(err, abort) {
		t.Fatalf("the aborted transaction: %v", err)
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Errorf("%d upstream connections held after the abort, want 0", n)
	}
	var counts []int64
	for _, s := range servers {
		n, err := driverClient(t, s.URI()+"?loadBalanced=true").Database("db").Collection("t").CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, n)
	}
	if !(counts[0] == 3 && counts[1] == 0 || counts[0] == 0 && counts[1] == 3) {
		t.Errorf("the mongoses have %v documents of the transactions, want the 3 committed on one of them", counts)
	}
}

// TestLoadBalancedUpstreamMaxPinned: beyond MaxPinned connections held, a
// command that would hold one more is refused with a retryable overload
// error that names the limit; a cursor's end makes room.
func TestLoadBalancedUpstreamMaxPinned(t *testing.T) {
	lb, servers := startLoadBalanced(t, 1)
	seedBackends(t, servers, 10)
	p, addr := startProxy(t, lbURI(lb), proxy.Mongos, proxy.Config{MaxPinned: 1})
	ctx := testContext(t)
	db := driverClient(t, "mongodb://"+addr+"/").Database("db")
	find := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}
	first, err := db.RunCommand(ctx, find).Raw()
	if err != nil {
		t.Fatal(err)
	}
	err = db.RunCommand(ctx, find).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(462) || !se.HasErrorLabel("RetryableError") || !strings.Contains(err.Error(), "max-pinned") {
		t.Fatalf("a second cursor with MaxPinned 1: %v, want an overload error naming the limit", err)
	}
	// A find of one batch holds nothing: it goes.
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "singleBatch", Value: true}}).Err(); err != nil {
		t.Fatalf("a single-batch find with MaxPinned reached: %v", err)
	}
	id := first.Lookup("cursor", "id").Int64()
	if err := db.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}}).Err(); err != nil {
		t.Fatal(err)
	}
	// Eight at once, with room for one: one holds, the others are
	// refused (the limit is reserved before the command goes, not
	// checked before and counted after).
	var wg sync.WaitGroup
	ids := make(chan int64, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if reply, err := db.RunCommand(ctx, find).Raw(); err == nil {
				ids <- reply.Lookup("cursor", "id").Int64()
			}
		}()
	}
	wg.Wait()
	close(ids)
	if len(ids) != 1 {
		t.Fatalf("%d of eight cursors opened at once with MaxPinned 1, want 1", len(ids))
	}
	if n := p.Stats().PinnedConns; n != 1 {
		t.Errorf("%d upstream connections held, want 1", n)
	}
	st := p.Status(false)
	if n, max := st.Lookup("pinned", "connections").Int64(), st.Lookup("pinned", "maxConnections").Int64(); n != 1 || max != 1 {
		t.Errorf("proxyStatus's pinned connections %d of %d, want 1 of 1", n, max)
	}
}

// TestLoadBalancedUpstreamHeldConnsGoBack: a cursor left open holds its
// connection for CursorTimeout unused at most, after which its getMore is
// answered CursorNotFound; Close gives back what is still held, so that
// the client's pool has nothing in use.
func TestLoadBalancedUpstreamHeldConnsGoBack(t *testing.T) {
	lb, servers := startLoadBalanced(t, 1)
	seedBackends(t, servers, 10)
	client, err := mongopool.NewClient(lbURI(lb))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := proxy.New(client, proxy.Config{CursorTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr, served := serve(t, p, proxy.Mongos)
	ctx := testContext(t)
	driver := driverClient(t, "mongodb://"+addr+"/")
	db := driver.Database("db")
	reply, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	id := reply.Lookup("cursor", "id").Int64()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().PinnedConns != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned cursor's connection was never given back")
		}
		time.Sleep(10 * time.Millisecond) // the reaper's tick: nothing to await
	}
	err = db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(43) {
		t.Fatalf("the getMore of an expired cursor: %v, want CursorNotFound", err)
	}
	// One more held, then Close.
	if _, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}).Raw(); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().PinnedConns; n != 1 {
		t.Fatalf("%d upstream connections held, want 1", n)
	}
	driver.Disconnect(ctx) // before the proxy goes, lest it wait for it
	p.Close()
	<-served
	if st := client.Pools()[0].Stats(); st.InUse != 0 {
		t.Errorf("after Close, %d of the client's connections are in use, want 0", st.InUse)
	}
}

// TestLoadBalancedUpstreamCommitRetriedElsewhere: a commit whose held
// connection breaks under it (the mongos closes it) is held and retried,
// once, over another connection, where the mongos finds the transaction
// by its session: the client sees the commit succeed, and the proxy does
// not retry it on the broken connection until ElectionHold runs out.
func TestLoadBalancedUpstreamCommitRetriedElsewhere(t *testing.T) {
	lb, servers := startLoadBalanced(t, 1)
	p, addr := startProxy(t, lbURI(lb), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("db").Collection("commit")
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := servers[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"commitTransaction"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.WithTransaction(ctx, func(tctx context.Context) (any, error) {
		_, err := coll.InsertOne(tctx, bson.D{{Key: "_id", Value: 1}})
		return nil, err
	}); err != nil {
		t.Fatalf("the transaction: %v", err)
	}
	if st := p.Stats(); st.Held != 1 || st.HeldRecovered != 1 || st.PinnedConns != 0 {
		t.Errorf("%d held retries, %d recovered, %d connections held; want the commit retried once, elsewhere, and nothing held", st.Held, st.HeldRecovered, st.PinnedConns)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("%d documents after the commit (%v), want 1", n, err)
	}
}

// TestLoadBalancedBothSides: a loadBalanced=true client of the proxy's
// load balancer listener, in front of a load-balanced upstream, leaves a
// cursor and a transaction open and its connection closes: the proxy kills
// the one and aborts the other over their held connections (a load
// balancer's services must, its clients never sending those commands
// elsewhere), and the connections go back.
func TestLoadBalancedBothSides(t *testing.T) {
	lb, servers := startLoadBalanced(t, 1)
	seedBackends(t, servers, 10)
	p, addr := startProxy(t, lbURI(lb), proxy.LoadBalancer, proxy.Config{})
	ctx := testContext(t)
	c := dialRaw(t, addr)
	if reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}})); reply.Lookup("serviceId").Type == 0 {
		t.Fatalf("the load balancer listener's hello: %v, want a serviceId", reply)
	}
	if reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})); reply.Lookup("cursor", "id").Int64() == 0 {
		t.Fatalf("find: %v, want a cursor left open", reply)
	}
	lsid := startTxn(t, c)
	if n := p.Stats().PinnedConns; n != 2 {
		t.Fatalf("%d upstream connections held with a cursor and a transaction open, want 2", n)
	}
	c.nc.Close() // gone, without a killCursors or an abortTransaction
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().PinnedConns != 0 || p.Stats().Cursors != 0 {
		if time.Now().After(deadline) {
			st := p.Stats()
			t.Fatalf("%d upstream connections still held, %d cursors mapped, after the client left", st.PinnedConns, st.Cursors)
		}
		time.Sleep(5 * time.Millisecond) // the connection's goroutine ends on its own
	}
	// The cursor was killed on its server.
	if n := servers[0].Stats().Commands["killCursors"]; n != 1 {
		t.Errorf("the server got %d killCursors, want 1, for the cursor the client left", n)
	}
	// The transaction was aborted: a commit of it fails, and nothing
	// of it was stored.
	direct := driverClient(t, servers[0].URI()+"?loadBalanced=true")
	commit := bson.D{{Key: "commitTransaction", Value: 1}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}}
	var se mongo.ServerError
	if err := direct.Database("admin").RunCommand(ctx, commit).Err(); !errors.As(err, &se) || !se.HasErrorCode(251) {
		t.Errorf("a commit of the abandoned transaction: %v, want NoSuchTransaction (251)", err)
	}
	n, err := direct.Database("db").Collection("t").CountDocuments(ctx, bson.D{})
	if err != nil || n != 0 {
		t.Errorf("%d documents of the abandoned transaction (%v), want 0", n, err)
	}
}

// TestLoadBalancedUpstreamEndSessions: endSessions lets go of the
// connection its session's open transaction held.
func TestLoadBalancedUpstreamEndSessions(t *testing.T) {
	lb, _ := startLoadBalanced(t, 1)
	p, addr := startProxy(t, lbURI(lb), proxy.Mongos, proxy.Config{})
	c := dialRaw(t, addr)
	lsid := startTxn(t, c)
	if n := p.Stats().PinnedConns; n != 1 {
		t.Fatalf("%d upstream connections held by an open transaction, want 1", n)
	}
	if reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "endSessions", Value: bson.A{lsid}}, {Key: "$db", Value: "admin"}})); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("endSessions: %v", reply)
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Errorf("%d upstream connections held after the session's end, want 0", n)
	}
}
