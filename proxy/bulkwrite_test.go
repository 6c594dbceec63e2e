package proxy_test

import (
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestClientBulkWrite: the official driver's Client.BulkWrite (MongoDB
// 8.0's bulkWrite command, on namespaces of two databases) through the
// proxy, which announces its upstream's wire versions: the driver sends it,
// the primary runs it, and the verbose results come back from its cursor.
func TestClientBulkWrite(t *testing.T) {
	rs := startReplicaSet(t, 1, mongotest.WithVersion("8.0"))
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/")
	writes := []mongo.ClientBulkWrite{
		{Database: "db1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
		{Database: "db1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})},
		{Database: "db2", Collection: "b", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 7}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}).SetUpsert(true)},
		{Database: "db1", Collection: "a", Model: mongo.NewClientDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}})},
	}
	res, err := c.BulkWrite(ctx, writes, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatalf("BulkWrite through the proxy: %v", err)
	}
	if res.InsertedCount != 2 || res.UpsertedCount != 1 || res.DeletedCount != 1 || res.UpdateResults[2].UpsertedID != int32(7) {
		t.Fatalf("result %+v; want 2 inserted, _id 7 upserted, 1 deleted", res)
	}
	if n := rs.Primary().Stats().Commands["bulkWrite"]; n != 1 {
		t.Errorf("the primary ran %d bulkWrites, want 1", n)
	}
	for _, w := range []struct {
		db, coll string
		n        int64
	}{{"db1", "a", 1}, {"db2", "b", 1}} {
		if n, err := c.Database(w.db).Collection(w.coll).CountDocuments(ctx, bson.D{}); err != nil || n != w.n {
			t.Errorf("%s.%s holds %d documents (%v), want %d", w.db, w.coll, n, err, w.n)
		}
	}
}

// TestBulkWriteResultsCursorLoadBalanced: in front of a load-balanced
// upstream, a bulkWrite whose results cursor stays open holds its upstream
// connection, since the cursor lives on the service behind it; its
// getMores go there, and the connection goes back once they end.
func TestBulkWriteResultsCursorLoadBalanced(t *testing.T) {
	s, err := mongotest.Start(mongotest.WithLoadBalanced(bson.NewObjectID()), mongotest.WithVersion("8.0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p, addr := startProxy(t, s.URI()+"?loadBalanced=true", proxy.Mongos, proxy.Config{})
	c := dialRaw(t, addr)
	var ops bson.A
	for i := range 3 {
		ops = append(ops, bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: i}}}})
	}
	reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: ops},
		{Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}},
		{Key: "$db", Value: "admin"}}))
	id := reply.Lookup("cursor", "id").Int64()
	if reply.Lookup("nInserted").Int32() != 3 || id == 0 {
		t.Fatalf("bulkWrite: %v; want 3 inserted and the results cursor left open", reply)
	}
	if n := p.Stats().PinnedConns; n != 1 {
		t.Fatalf("%d upstream connections held with the results cursor open, want 1", n)
	}
	results := 1
	for id != 0 {
		reply = c.roundTrip(mustMarshal(t, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "$cmd.bulkWrite"},
			{Key: "batchSize", Value: 1}, {Key: "$db", Value: "admin"}}))
		batch, ok := reply.Lookup("cursor", "nextBatch").ArrayOK()
		if !ok {
			t.Fatalf("getMore of the results: %v", reply)
		}
		vals, _ := batch.Values()
		results += len(vals)
		id = reply.Lookup("cursor", "id").Int64()
	}
	if results != 3 {
		t.Errorf("%d results read, want 3", results)
	}
	if n := p.Stats().PinnedConns; n != 0 {
		t.Errorf("%d upstream connections held after the results cursor ended, want 0", n)
	}
}
