package proxy_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// startProxy starts a proxy in front of uri, presenting persona on a
// loopback listener, and returns it with its address; both end with the
// test. The proxy's client shares cfg.BusyPoller, if any.
func startProxy(t testing.TB, uri string, persona proxy.Persona, cfg proxy.Config) (*proxy.Proxy, string) {
	t.Helper()
	client, err := mongopool.NewClient(uri, mongopool.WithBusyPoller(cfg.BusyPoller))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return startProxyOf(t, client, persona, cfg)
}

// startProxyOf starts a proxy of client, presenting persona, closed at the
// end of the test.
func startProxyOf(t testing.TB, client *mongopool.Client, persona proxy.Persona, cfg proxy.Config) (*proxy.Proxy, string) {
	t.Helper()
	p, err := proxy.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, served := serve(t, p, persona)
	t.Cleanup(func() {
		p.Close()
		if err := <-served; !errors.Is(err, proxy.ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return p, addr
}

// serve serves p, presenting persona, on a loopback listener, and returns
// its address and the channel of Serve's result.
func serve(t testing.TB, p *proxy.Proxy, persona proxy.Persona) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln, persona) }()
	return ln.Addr().String(), served
}

// driverClient connects the official Go driver to the proxy at addr.
func driverClient(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Disconnect(ctx)
	})
	return c
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startReplicaSet(t testing.TB, members int, opts ...mongotest.Option) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs0", members, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

func TestDriverCRUDAndCursorsThroughProxy(t *testing.T) {
	rs := startReplicaSet(t, 3)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	coll := c.Database("shop").Collection("items")
	var docs []any
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: i * i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatalf("insertMany: %v", err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(3).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatalf("iterating the cursor (getMore): %v", err)
	}
	if len(got) != 10 {
		t.Fatalf("find returned %d documents through the getMores, want 10", len(got))
	}
	// A cursor closed early is killed on its server.
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) {
		t.Fatal(cur.Err())
	}
	if p.Stats().Cursors != 1 {
		t.Fatalf("the proxy maps %d cursors, want 1", p.Stats().Cursors)
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatalf("closing the cursor (killCursors): %v", err)
	}
	if n := p.Stats().Cursors; n != 0 {
		t.Fatalf("after killCursors the proxy maps %d cursors, want 0", n)
	}
	if killed := rs.Primary().Stats().Commands["killCursors"]; killed != 1 {
		t.Fatalf("the primary got %d killCursors, want 1", killed)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 25}}}})
	if err != nil || n != 5 {
		t.Fatalf("countDocuments = %d, %v; want 5", n, err)
	}
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: -1}}}})
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("updateOne = %+v, %v", res, err)
	}
	t.Logf("%+v", p.Stats())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("a duplicate insert returned %v, want a duplicate key error", err)
	}
}

func TestSecondaryReadsGoToSecondaries(t *testing.T) {
	rs := startReplicaSet(t, 3)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	if _, err := c.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	before := map[string]int64{}
	for _, m := range rs.Members() {
		before[m.Addr()] = m.Stats().Commands["find"]
	}
	coll := c.Database("db").Collection("c", options.Collection().SetReadPreference(readpref.Secondary()))
	for range 10 {
		if err := coll.FindOne(ctx, bson.D{}).Err(); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("find with readPreference secondary: %v", err)
		}
	}
	primary := rs.Primary().Addr()
	secondaryFinds := int64(0)
	for _, m := range rs.Members() {
		d := m.Stats().Commands["find"] - before[m.Addr()]
		if m.Addr() == primary && d != 0 {
			t.Fatalf("the primary got %d of the secondary reads", d)
		}
		if m.Addr() != primary {
			secondaryFinds += d
		}
	}
	if secondaryFinds != 10 {
		t.Fatalf("the secondaries got %d finds, want 10", secondaryFinds)
	}
}

func TestProxyStatusCommand(t *testing.T) {
	rs := startReplicaSet(t, 2)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/?appName=orders")
	coll := c.Database("db").Collection("c")
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Database("db").RunCommand(ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Err(); err == nil {
		t.Fatal("an unknown command succeeded")
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	st, err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "proxyStatus", Value: 1}, {Key: "clients", Value: true}}).Raw()
	if err != nil {
		t.Fatalf("proxyStatus: %v", err)
	}
	app := st.Lookup("clients", "byAppName", "orders")
	if app.Document().Lookup("connections").Int64() < 1 || app.Document().Lookup("operations").Int64() < 7 {
		t.Fatalf("the orders application: %v", app)
	}
	list, _ := st.Lookup("clients", "list").Array().Values()
	if len(list) != p.Stats().ClientConns {
		t.Fatalf("%d clients listed, %d open", len(list), p.Stats().ClientConns)
	}
	if n := st.Lookup("pinned", "cursors").Int64(); n != 1 {
		t.Fatalf("pinned cursors = %d, want 1", n)
	}
	ups, _ := st.Lookup("upstreams").Array().Values()
	if len(ups) != 2 {
		t.Fatalf("upstreams: %v", ups)
	}
	primaryTotal := int64(-1)
	for _, u := range ups {
		if u.Document().Lookup("type").StringValue() == "RSPrimary" {
			primaryTotal = u.Document().Lookup("pool", "total").Int64()
		}
	}
	if primaryTotal < 1 {
		t.Fatalf("the primary's pool: %v", ups)
	}
	apps := p.Apps()
	for _, a := range apps {
		if a.AppName != "orders" {
			continue
		}
		if a.Errors < 1 {
			t.Fatalf("the failed command was not counted: %+v", a)
		}
		// The application's operations are timed as the proxy's are.
		if a.Latency.Count != uint64(a.Operations) || a.Latency.Sum <= 0 {
			t.Errorf("the orders application's latency: %d samples summing to %v for %d operations", a.Latency.Count, a.Latency.Sum, a.Operations)
		}
	}
	if p50 := app.Document().Lookup("latencyMicros", "p50").Int64(); p50 <= 0 {
		t.Errorf("proxyStatus's byAppName.orders.latencyMicros: %v", app.Document().Lookup("latencyMicros"))
	}
	// Every operation relayed is timed (none of them a long poll): the
	// inserts, the unknown command and the find, at least.
	stats := p.Stats()
	if stats.Latency.Count != uint64(stats.Operations) || stats.Latency.Count < 7 || stats.Latency.Sum <= 0 {
		t.Errorf("Latency: %d samples summing to %v for %d operations relayed", stats.Latency.Count, stats.Latency.Sum, stats.Operations)
	}
	if p50 := st.Lookup("operations", "latencyMicros", "p50").Int64(); p50 <= 0 {
		t.Errorf("proxyStatus's operations.latencyMicros: %v", st.Lookup("operations", "latencyMicros"))
	}
}
