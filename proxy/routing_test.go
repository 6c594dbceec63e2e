package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/wire"
)

func TestTransactionsThroughProxy(t *testing.T) {
	for _, deployment := range []string{"replica set", "sharded cluster"} {
		t.Run(deployment, func(t *testing.T) {
			uri := ""
			var sc *mongotest.ShardedCluster
			if deployment == "replica set" {
				uri = startReplicaSet(t, 3).URI()
			} else {
				var err error
				sc, err = mongotest.StartShardedCluster(2, 2)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sc.Close() })
				uri = sc.URI()
			}
			p, addr := startProxy(t, uri, proxy.Mongos, proxy.Config{})
			ctx := testContext(t)
			c := driverClient(t, "mongodb://"+addr+"/")
			coll := c.Database("bank").Collection("accounts")
			if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}, {Key: "v", Value: 100}}, bson.D{{Key: "_id", Value: "b"}, {Key: "v", Value: 0}}}); err != nil {
				t.Fatal(err)
			}
			sess, err := c.StartSession()
			if err != nil {
				t.Fatal(err)
			}
			defer sess.EndSession(ctx)
			for i := range 5 {
				_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
					if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: -10}}}}); err != nil {
						return nil, err
					}
					if sc != nil && p.Stats().Pins != 1 {
						return nil, fmt.Errorf("transaction %d: %d pins in the proxy, want 1", i, p.Stats().Pins)
					}
					var doc bson.M
					if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&doc); err != nil {
						return nil, err
					}
					_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 10}}}})
					return nil, err
				})
				if err != nil {
					t.Fatalf("transaction %d: %v", i, err)
				}
			}
			// An aborted transaction leaves nothing.
			errAbort := errors.New("abort")
			_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: -1}}}}); err != nil {
					return nil, err
				}
				return nil, errAbort
			})
			if !errors.Is(err, errAbort) {
				t.Fatalf("aborted transaction: %v", err)
			}
			var a, b bson.M
			coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&a)
			coll.FindOne(ctx, bson.D{{Key: "_id", Value: "b"}}).Decode(&b)
			if a["v"] != int32(50) || b["v"] != int32(50) {
				t.Fatalf("after 5 transfers of 10 and an abort: a = %v, b = %v; want 50 and 50", a["v"], b["v"])
			}
		})
	}
}

func TestCursorsOnSeveralServers(t *testing.T) {
	rs := startReplicaSet(t, 3)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 3}))
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var cursors []*mongo.Cursor
	for _, rp := range []*readpref.ReadPref{readpref.Primary(), readpref.Secondary(), readpref.Secondary(), readpref.Primary()} {
		cur, err := c.Database("db").Collection("c", options.Collection().SetReadPreference(rp)).Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, cur)
	}
	if n := p.Stats().Cursors; n != 4 {
		t.Fatalf("the proxy maps %d cursors, want 4", n)
	}
	ids := map[int64]bool{}
	for i, cur := range cursors {
		if ids[cur.ID()] {
			t.Fatalf("two cursors have the id %d as the client sees them", cur.ID())
		}
		ids[cur.ID()] = true
		n := 0
		for cur.Next(ctx) {
			n++
			if i%2 == 1 && n == 5 {
				break // two cursors are closed early
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatalf("cursor %d: %v", i, err)
		}
		if i%2 == 0 && n != 20 {
			t.Fatalf("cursor %d returned %d documents, want 20", i, n)
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Stats().Cursors; n != 0 {
		t.Fatalf("the proxy still maps %d cursors", n)
	}
	// A getMore of a cursor the proxy does not know is CursorNotFound.
	raw := dialRaw(t, addr)
	reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "getMore", Value: int64(12345)}, {Key: "collection", Value: "c"}, {Key: "$db", Value: "db"}}))
	if reply.Lookup("code").Int32() != 43 {
		t.Fatalf("getMore of an unknown cursor: %v, want CursorNotFound (43)", reply)
	}
}

func TestKillCursorsSplitPerServer(t *testing.T) {
	rs := startReplicaSet(t, 2)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 2}))
	for i := range 10 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	raw := dialRaw(t, addr)
	var ids bson.A
	for _, mode := range []string{"primary", "secondary"} {
		reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: mode}}}, {Key: "$db", Value: "db"}}))
		id := reply.Lookup("cursor", "id").Int64()
		if id == 0 {
			t.Fatalf("find on the %s: no cursor: %v", mode, reply)
		}
		ids = append(ids, id)
	}
	ids = append(ids, int64(777))
	reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: ids}, {Key: "$db", Value: "db"}}))
	killed, _ := reply.Lookup("cursorsKilled").Array().Values()
	notFound, _ := reply.Lookup("cursorsNotFound").Array().Values()
	if len(killed) != 2 || len(notFound) != 1 || notFound[0].Int64() != 777 {
		t.Fatalf("killCursors of a primary's, a secondary's and an unknown cursor: %v", reply)
	}
	for i, k := range killed {
		if k.Int64() != ids[i].(int64) {
			t.Fatalf("cursorsKilled = %v, want the proxy's ids %v", killed, ids[:2])
		}
	}
	for _, m := range rs.Members() {
		if n := m.Stats().Commands["killCursors"]; n != 1 {
			t.Fatalf("member %s got %d killCursors, want 1", m.Addr(), n)
		}
	}
	if n := p.Stats().Cursors; n != 0 {
		t.Fatalf("the proxy still maps %d cursors", n)
	}
}

func TestExhaustGetMoreAnsweredWhole(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	raw := dialRaw(t, addr)
	var docs bson.A
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	raw.roundTrip(mustMarshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}, {Key: "$db", Value: "db"}}))
	reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}, {Key: "$db", Value: "db"}}))
	id := reply.Lookup("cursor", "id").Int64()
	req := raw.send(mustMarshal(t, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 2}, {Key: "$db", Value: "db"}}), wire.ExhaustAllowed, 0)
	h, flags, body, _ := raw.read()
	if h.ResponseTo != req || flags&wire.MoreToCome != 0 {
		t.Fatalf("an exhaust getMore got flags %v: the proxy streams nothing", flags)
	}
	if n, _ := body.Lookup("cursor", "nextBatch").Array().Values(); len(n) != 2 {
		t.Fatalf("getMore: %v", body)
	}
	// The connection is in step: another command works.
	if raw.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})).Lookup("ok").Double() != 1 {
		t.Fatal("ping after the getMore failed")
	}
}

func TestUnacknowledgedWrites(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	acked := c.Database("db").Collection("c")
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := acked.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 w:0 inserts arrived", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStepDownUnderLoadLosesNoWrite(t *testing.T) {
	rs := startReplicaSet(t, 3)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	// The driver's own retries are on (its retryable writes need them,
	// for the txnNumber), but every failed attempt is counted: the proxy
	// is to hide the step-downs, so the driver sees none.
	var failedAttempts atomic.Int64
	var firstFailure atomic.Value
	monitor := &event.CommandMonitor{Failed: func(_ context.Context, e *event.CommandFailedEvent) {
		failedAttempts.Add(1)
		firstFailure.CompareAndSwap(nil, e.CommandName+": "+e.Failure.Error())
	}}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetMonitor(monitor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("db").Collection("c")
	var acked sync.Map
	var failedOps atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
					failedOps.Add(1)
					continue
				}
				acked.Store(id, true)
				if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err(); err != nil {
					failedOps.Add(1)
				}
			}
		}()
	}
	waitOps := func(n int64) {
		deadline := time.Now().Add(10 * time.Second)
		for start := p.Stats().Operations; p.Stats().Operations < start+n; {
			if time.Now().After(deadline) {
				t.Fatalf("no %d operations within 10 s: %+v; failed attempts %d (first %v), failed ops %d", n, p.Stats(), failedAttempts.Load(), firstFailure.Load(), failedOps.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 2 {
		waitOps(200)
		next := 0
		for i, m := range rs.Members() {
			if m == rs.Primary() {
				next = (i + 1) % 3
			}
		}
		if err := rs.StepDown(ctx); err != nil {
			t.Fatal(err)
		}
		// The election takes a while, in which the writes wait.
		time.Sleep(300 * time.Millisecond)
		if err := rs.Elect(next); err != nil {
			t.Fatal(err)
		}
	}
	waitOps(200)
	close(stop)
	wg.Wait()
	st := p.Stats()
	if f := failedAttempts.Load(); f != 0 || failedOps.Load() != 0 {
		t.Fatalf("the driver saw %d failed attempts (first: %v) and %d failed operations through two step-downs; want none", f, firstFailure.Load(), failedOps.Load())
	}
	if st.Held == 0 || st.HeldRecovered == 0 {
		t.Fatalf("the proxy held %d attempts, %d recovered: the step-downs hit no operation", st.Held, st.HeldRecovered)
	}
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if c, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: k}}); err != nil || c != 1 {
			t.Fatalf("acknowledged insert %v: stored %d times (%v), want once", k, c, err)
		}
		return true
	})
	total, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || total != int64(n) {
		t.Fatalf("%d documents stored for %d acknowledged inserts (%v)", total, n, err)
	}
	t.Logf("%d acknowledged inserts through two step-downs; proxy: held %d attempts, %d operations recovered", n, st.Held, st.HeldRecovered)
}

func TestLoadBalancerPersona(t *testing.T) {
	rs := startReplicaSet(t, 3)
	p, addr := startProxy(t, rs.URI(), proxy.LoadBalancer, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/?loadBalanced=true")
	coll := c.Database("db").Collection("c")
	var docs []any
	for i := range 7 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil || len(got) != 7 {
		t.Fatalf("a cursor through the load balancer persona: %d documents, %v", len(got), err)
	}
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if _, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "txn"}})
	}); err != nil {
		t.Fatalf("a transaction through the load balancer persona: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 8 {
		t.Fatalf("count = %d, %v; want 8", n, err)
	}
	// A client that does not say loadBalanced=true is served as by a
	// mongos; a mongos listener refuses one that does.
	plain := driverClient(t, "mongodb://"+addr+"/")
	if err := plain.Ping(ctx, nil); err != nil {
		t.Fatalf("a plain client of the load balancer listener: %v", err)
	}
	_, mongosAddr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	lbc, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + mongosAddr + "/?loadBalanced=true").SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lbc.Disconnect(ctx)
	if err := lbc.Ping(ctx, nil); err == nil {
		t.Fatal("a loadBalanced=true client of a mongos listener connected")
	}
	_ = p
}

func TestSeveralProxiesInOneSeedList(t *testing.T) {
	rs := startReplicaSet(t, 3)
	p1, a1 := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	p2, a2 := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+a1+","+a2+"/?localThresholdMS=1000")
	coll := c.Database("db").Collection("c")
	var docs []any
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(3))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.M
		if err := cur.All(ctx, &got); err != nil || len(got) != 10 {
			t.Fatalf("a cursor through one of two proxies: %d documents, %v", len(got), err)
		}
	}
	s1, s2 := p1.Stats(), p2.Stats()
	if s1.Operations == 0 || s2.Operations == 0 {
		t.Fatalf("the driver used one proxy only: %d and %d operations", s1.Operations, s2.Operations)
	}
}

func TestShutdownDrains(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	idle := dialRaw(t, addr)
	idle.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))
	done := holdConnection(t, p, addr, 300)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- p.Shutdown(ctx)
	}()
	// The idle client is closed at once; the busy one gets its reply.
	if _, err := idle.nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection got a byte")
	}
	if done().Lookup("ok").Double() != 1 {
		t.Fatal("the operation under way failed in the drain")
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}
