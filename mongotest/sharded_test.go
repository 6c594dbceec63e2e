package mongotest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The mongos behaviours asserted here are those of the MongoDB manual's
// "Sharding" pages (https://www.mongodb.com/docs/manual/sharding/, the
// primary shard of a database: .../core/sharded-cluster-shards/) and the
// transactions specification's "Sharded Transactions" (mongos pinning, the
// recoveryToken).

func startCluster(t *testing.T, mongoses, shards int, opts ...mongotest.Option) *mongotest.ShardedCluster {
	t.Helper()
	sc, err := mongotest.StartShardedCluster(mongoses, shards, opts...)
	if err != nil {
		t.Fatalf("StartShardedCluster: %v", err)
	}
	t.Cleanup(func() {
		if err := sc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sc
}

// databasesOn returns two database names that the cluster places on
// different shards.
func databasesOn(t *testing.T, sc *mongotest.ShardedCluster) (string, string) {
	t.Helper()
	for i := range 100 {
		a, b := "db0", fmt.Sprintf("db%d", i+1)
		if sc.ShardOf(a) != sc.ShardOf(b) {
			return a, b
		}
	}
	t.Fatal("no two databases on different shards")
	return "", ""
}

func TestShardedClusterWithDriver(t *testing.T) {
	sc := startCluster(t, 2, 2)
	var events []string
	client := connectWith(t, options.Client().ApplyURI(sc.URI()).SetServerSelectionTimeout(testTimeout).
		SetMonitor(&event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" || e.CommandName == "getMore" {
				events = append(events, e.ConnectionID)
			}
		}}))
	c := ctx(t)
	a, b := databasesOn(t, sc)
	for _, db := range []string{a, b} {
		docs := make([]any, 10)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "db", Value: db}}
		}
		if _, err := client.Database(db).Collection("c").InsertMany(c, docs); err != nil {
			t.Fatalf("InsertMany into %s: %v", db, err)
		}
	}
	// Each database is on its own shard, whole.
	for j, rs := range sc.Shards() {
		r := dialRaw(t, rs.Primary())
		for _, db := range []string{a, b} {
			reply := r.run(cmd(db, bson.E{Key: "count", Value: "c"}))
			checkOK(t, reply)
			n := reply.Lookup("n").Int32()
			if want := map[bool]int32{true: 10, false: 0}[sc.ShardOf(db) == j]; n != want {
				t.Errorf("shard%d has %d documents of %s, want %d (%s is on shard%d)", j, n, db, want, db, sc.ShardOf(db))
			}
		}
	}
	// Cursors of both shards, open at once through one mongos: the shards
	// number their cursors alike, the mongos does not.
	curA, err := client.Database(a).Collection("c").Find(c, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	curB, err := client.Database(b).Collection("c").Find(c, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if curA.ID() == curB.ID() {
		t.Errorf("two cursors with id %d", curA.ID())
	}
	for _, tc := range []struct {
		cur *mongo.Cursor
		db  string
	}{{curA, a}, {curB, b}} {
		var got []bson.M
		if err := tc.cur.All(c, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 {
			t.Errorf("%s: %d documents, want 10", tc.db, len(got))
		}
		for _, d := range got {
			if d["db"] != tc.db {
				t.Errorf("a cursor of %s returned %v", tc.db, d)
			}
		}
	}
	// Killing a cursor goes to its shard.
	cur, err := client.Database(b).Collection("c").Find(c, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.Close(c); err != nil {
		t.Fatal(err)
	}
	if n := sc.Shards()[sc.ShardOf(b)].Primary().Stats().Commands["killCursors"]; n != 1 {
		t.Errorf("the shard of %s got %d killCursors, want 1", b, n)
	}
	dbs, err := client.ListDatabaseNames(c, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range dbs {
		if name == a || name == b {
			found++
		}
	}
	if found != 2 {
		t.Errorf("listDatabases: %v; want %s and %s", dbs, a, b)
	}
}

func TestShardedClusterFailover(t *testing.T) {
	sc := startCluster(t, 2, 1, mongotest.WithShardMembers(3))
	w := newTopologyWatch()
	client := connectWith(t, options.Client().ApplyURI(sc.URI()+"?serverSelectionTimeoutMS=20000&heartbeatFrequencyMS=500").SetServerMonitor(w.monitor()))
	c := ctx(t)
	coll := client.Database("x").Collection("c")
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// The shard's primary steps down; the next is elected while the
	// mongos waits for it: the write succeeds.
	shard := sc.Shards()[0]
	if err := shard.StepDown(c); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 2}})
		done <- err
	}()
	if err := shard.Elect(2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("an insert through a step-down: %v", err)
	}
	// A mongos stops: once the driver sees it down, it uses the other.
	if err := sc.StopMongos(0); err != nil {
		t.Fatal(err)
	}
	stopped := sc.Mongoses()[0].Addr()
	w.waitFor(t, "the stopped mongos Unknown", func(td event.TopologyDescription) bool {
		for _, sd := range td.Servers {
			if sd.Addr.String() == stopped {
				return sd.Kind == "Unknown"
			}
		}
		return false
	})
	for i := 3; i < 6; i++ {
		if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatalf("insert %d with a mongos down: %v", i, err)
		}
	}
	if err := sc.RestartMongos(0); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(c, bson.D{}); err != nil || n != 5 {
		t.Errorf("CountDocuments = %d, %v; want 5", n, err)
	}
	// A shard without a primary for longer than maxTimeMS: the mongos
	// says so.
	if err := shard.StepDown(c); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, sc.Mongoses()[1])
	reply := r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{}}}, bson.E{Key: "maxTimeMS", Value: 50}))
	checkError(t, reply, 133, "FailedToSatisfyReadPreference")
	if reply.Lookup("topologyVersion").Type != 0 {
		t.Errorf("a mongos's error carries a topologyVersion: %s", reply)
	}
}

func TestShardedTransactions(t *testing.T) {
	sc := startCluster(t, 2, 2)
	client := connect(t, sc.URI())
	c := ctx(t)
	a, b := databasesOn(t, sc)
	coll := client.Database(a).Collection("c")
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(c)
	if _, err := sess.WithTransaction(c, func(sc context.Context) (any, error) {
		for i := 1; i <= 3; i++ {
			if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: i}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}); err != nil {
		t.Fatalf("WithTransaction through mongos: %v", err)
	}
	if n, err := coll.CountDocuments(c, bson.D{}); err != nil || n != 4 {
		t.Errorf("CountDocuments = %d, %v; want 4", n, err)
	}

	// Raw: a transaction started on mongos 0 is unknown to mongos 1, but
	// a commit there with the recoveryToken finds its decision.
	r0, r1 := dialRaw(t, sc.Mongoses()[0]), dialRaw(t, sc.Mongoses()[1])
	x := &txn{session: lsid(7), number: 1}
	reply := r0.run(x.cmd(a, insertDocs(doc(10, 0))...))
	checkOK(t, reply)
	token := reply.Lookup("recoveryToken")
	if token.Type != bson.TypeEmbeddedDocument {
		t.Fatalf("a statement of a transaction through mongos has no recoveryToken: %s", reply)
	}
	checkError(t, r1.run(x.cmd(a, insertDocs(doc(11, 0))...)), 251, "NoSuchTransaction")
	// Its commands may not reach another shard.
	checkError(t, r0.run(x.cmd(b, insertDocs(doc(12, 0))...)), 2, "BadValue")
	x2 := &txn{session: lsid(8), number: 1}
	checkOK(t, r0.run(x2.cmd(a, insertDocs(doc(20, 0))...)))
	checkOK(t, r0.run(x2.commit()))
	commit := x2.cmd("admin", bson.E{Key: "commitTransaction", Value: 1}, bson.E{Key: "recoveryToken", Value: token})
	checkOK(t, r1.run(commit))
	checkError(t, r1.run(x2.cmd("admin", bson.E{Key: "commitTransaction", Value: 1})), 251, "NoSuchTransaction")
	// A transaction that never began to commit has no decision to
	// recover: the recovery aborts it.
	x3 := &txn{session: lsid(9), number: 1}
	checkOK(t, r0.run(x3.cmd(a, insertDocs(doc(30, 0))...)))
	checkError(t, r1.run(x3.cmd("admin", bson.E{Key: "commitTransaction", Value: 1}, bson.E{Key: "recoveryToken", Value: token})), 251, "NoSuchTransaction")
	checkError(t, r0.run(x3.commit()), 251, "NoSuchTransaction")
}

// TestMongosFailPoints checks that each mongos has its own fail points.
func TestMongosFailPoints(t *testing.T) {
	sc := startCluster(t, 2, 1)
	m0, m1 := sc.Mongoses()[0], sc.Mongoses()[1]
	if err := m0.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91, Times: 1}); err != nil {
		t.Fatal(err)
	}
	r0, r1 := dialRaw(t, m0), dialRaw(t, m1)
	checkOK(t, r1.run(insertCmd(1)))
	checkError(t, r0.run(insertCmd(2)), 91, "ShutdownInProgress")
	checkOK(t, r0.run(insertCmd(2)))
	hello := r0.run(cmd("admin", bson.E{Key: "hello", Value: 1}))
	if msg, _ := hello.Lookup("msg").StringValueOK(); msg != "isdbgrid" {
		t.Errorf("a mongos's hello: %s", hello)
	}
	if _, err := mongotest.StartShardedCluster(0, 1); err == nil {
		t.Error("a cluster without mongos started")
	}
	if _, err := mongotest.StartShardedCluster(1, 1, mongotest.WithReplicaSet("rs0")); err == nil {
		t.Error("StartShardedCluster took WithReplicaSet")
	}
	if err := sc.StopMongos(5); err == nil {
		t.Error("StopMongos of a mongos that does not exist")
	}
}

// TestMongosStreams checks that a cluster's mongos reports a
// topologyVersion, a new processId after a restart, and answers the
// awaitable hello, as a mongos of MongoDB 4.4 and later does (the server
// monitoring specification's streaming protocol).
func TestMongosStreams(t *testing.T) {
	sc := startCluster(t, 1, 1)
	r := dialRaw(t, sc.Mongoses()[0])
	hello := r.run(cmd("admin", bson.E{Key: "hello", Value: 1}))
	tv, ok := hello.Lookup("topologyVersion").DocumentOK()
	if !ok {
		t.Fatalf("a mongos's hello without topologyVersion: %s", hello)
	}
	aw := r.run(cmd("admin", bson.E{Key: "hello", Value: 1}, bson.E{Key: "topologyVersion", Value: tv}, bson.E{Key: "maxAwaitTimeMS", Value: int64(10)}))
	checkOK(t, aw)
	if n := sc.Mongoses()[0].Stats().AwaitableHellos; n != 1 {
		t.Errorf("%d awaitable hellos, want 1", n)
	}
	if err := sc.StopMongos(0); err != nil {
		t.Fatal(err)
	}
	if err := sc.RestartMongos(0); err != nil {
		t.Fatal(err)
	}
	again := dialRaw(t, sc.Mongoses()[0]).run(cmd("admin", bson.E{Key: "hello", Value: 1}))
	if again.Lookup("topologyVersion", "processId").Equal(tv.Lookup("processId")) {
		t.Error("a restarted mongos kept its processId")
	}
}

// TestShardedDBStats: a mongos answers dbStats with the figures of the
// shard that holds the database, not those of a store of its own, which
// holds nothing.
func TestShardedDBStats(t *testing.T) {
	sc := startCluster(t, 1, 2)
	client := connect(t, sc.URI())
	c := ctx(t)
	a, b := databasesOn(t, sc)
	for i, db := range []string{a, b} {
		docs := make([]any, 3+i)
		for j := range docs {
			docs[j] = bson.D{{Key: "_id", Value: j}}
		}
		if _, err := client.Database(db).Collection("c").InsertMany(c, docs); err != nil {
			t.Fatal(err)
		}
	}
	for i, db := range []string{a, b} {
		var stats struct {
			DB      string `bson:"db"`
			Objects int64  `bson:"objects"`
		}
		if err := client.Database(db).RunCommand(c, bson.D{{Key: "dbStats", Value: 1}}).Decode(&stats); err != nil {
			t.Fatalf("dbStats of %s: %v", db, err)
		}
		if stats.DB != db || stats.Objects != int64(3+i) {
			t.Errorf("dbStats of %s through the mongos: %+v; want %d objects", db, stats, 3+i)
		}
	}
}
