package mongotest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDriverClientBulkWrite runs the official driver's Client.BulkWrite
// (the bulkWrite command of MongoDB 8.0) against a server that announces
// 8.0: every kind of operation, on collections of two databases, with the
// verbose results the driver reads from the command's results cursor, and
// the documents stored as they say.
func TestDriverClientBulkWrite(t *testing.T) {
	srv := start(t, mongotest.WithVersion("8.0"))
	client := connect(t, srv.URI())
	c := ctx(t)
	a, b := client.Database("db1").Collection("a"), client.Database("db2").Collection("b")
	if _, err := a.InsertMany(c, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.InsertMany(c, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	writes := []mongo.ClientBulkWrite{
		{Database: "db1", Collection: "a", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 2}})},
		{Database: "db1", Collection: "a", Model: mongo.NewClientUpdateManyModel().SetFilter(bson.D{{Key: "x", Value: 1}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 10}}}})},
		{Database: "db2", Collection: "b", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 9}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "up", Value: true}}}}).SetUpsert(true)},
		{Database: "db2", Collection: "b", Model: mongo.NewClientReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetReplacement(bson.D{{Key: "r", Value: 1}})},
		{Database: "db2", Collection: "b", Model: mongo.NewClientReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetReplacement(bson.D{{Key: "r", Value: 1}})},
		{Database: "db2", Collection: "b", Model: mongo.NewClientDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}})},
		{Database: "db2", Collection: "b", Model: mongo.NewClientDeleteManyModel().SetFilter(bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 3}}}})},
	}
	res, err := client.BulkWrite(c, writes, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil {
		t.Fatalf("BulkWrite: %v", err)
	}
	if res.InsertedCount != 1 || res.MatchedCount != 4 || res.ModifiedCount != 3 || res.UpsertedCount != 1 || res.DeletedCount != 3 {
		t.Errorf("counts: %+v; want 1 inserted, 4 matched, 3 modified, 1 upserted, 3 deleted", res)
	}
	if r := res.InsertResults[0]; r.InsertedID != int32(3) {
		t.Errorf("insert result %+v, want _id 3", r)
	}
	if r := res.UpdateResults[1]; r.MatchedCount != 2 || r.ModifiedCount != 2 || r.UpsertedID != nil {
		t.Errorf("updateMany result %+v, want 2 matched and modified", r)
	}
	if r := res.UpdateResults[2]; r.MatchedCount != 1 || r.ModifiedCount != 0 || r.UpsertedID != int32(9) {
		t.Errorf("upsert result %+v, want the upserted _id 9", r)
	}
	if r := res.UpdateResults[4]; r.MatchedCount != 1 || r.ModifiedCount != 0 {
		t.Errorf("a replacement that changes nothing: %+v, want 1 matched, 0 modified", r)
	}
	if r := res.DeleteResults[6]; r.DeletedCount != 2 {
		t.Errorf("deleteMany result %+v, want 2 deleted", r)
	}
	wantDocs(t, a.Name(), collDocs(t, a), `{"_id":1,"x":11}`, `{"_id":2,"x":11}`, `{"_id":3,"x":2}`)
	wantDocs(t, b.Name(), collDocs(t, b), `{"_id":1,"r":1}`)
	if n := srv.Stats().Commands["bulkWrite"]; n != 1 {
		t.Errorf("%d bulkWrite commands, want the one", n)
	}
}

// TestDriverClientBulkWriteErrors: a failed operation is a write error of
// the driver's ClientBulkWriteException, at its index; ordered, the
// operations after it do not run, unordered they do; the partial result
// counts what ran.
func TestDriverClientBulkWriteErrors(t *testing.T) {
	srv := start(t, mongotest.WithVersion("8.0"))
	client := connect(t, srv.URI())
	c := ctx(t)
	for _, ordered := range []bool{true, false} {
		coll := client.Database("db").Collection("ordered")
		if !ordered {
			coll = client.Database("db").Collection("unordered")
		}
		insert := func(id int) mongo.ClientBulkWrite {
			return mongo.ClientBulkWrite{Database: "db", Collection: coll.Name(), Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: id}})}
		}
		_, err := client.BulkWrite(c, []mongo.ClientBulkWrite{insert(1), insert(1), insert(2)}, options.ClientBulkWrite().SetOrdered(ordered))
		var bwe mongo.ClientBulkWriteException
		if !errors.As(err, &bwe) {
			t.Fatalf("ordered %v: %v (%T); want a ClientBulkWriteException", ordered, err, err)
		}
		we, ok := bwe.WriteErrors[1]
		if len(bwe.WriteErrors) != 1 || !ok || we.Code != 11000 {
			t.Fatalf("ordered %v: write errors %+v; want the duplicate key error (11000) of operation 1", ordered, bwe.WriteErrors)
		}
		wantInserted, want := int64(1), []string{`{"_id":1}`}
		if !ordered {
			wantInserted, want = 2, []string{`{"_id":1}`, `{"_id":2}`}
		}
		if bwe.PartialResult == nil || bwe.PartialResult.InsertedCount != wantInserted {
			t.Errorf("ordered %v: partial result %+v; want %d inserted", ordered, bwe.PartialResult, wantInserted)
		}
		wantDocs(t, coll.Name(), collDocs(t, coll), want...)
	}
}

// TestBulkWriteCommand runs the command itself: its results cursor in
// batches (getMore on admin.$cmd.bulkWrite), errorsOnly, and the errors of
// a command that breaks the rules. A server of MongoDB 7.0 does not know it.
func TestBulkWriteCommand(t *testing.T) {
	srv := start(t, mongotest.WithVersion("8.0"))
	client := connect(t, srv.URI())
	c := ctx(t)
	admin := client.Database("admin")
	ops := bson.A{}
	for i := range 5 {
		ops = append(ops, bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: i}}}})
	}
	ops = append(ops, bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 0}}}})
	cmd := func(more ...bson.E) bson.D {
		return append(bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: ops}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}}, {Key: "ordered", Value: false}}, more...)
	}
	cur, err := admin.RunCommandCursor(c, cmd(bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 2}}}))
	if err != nil {
		t.Fatal(err)
	}
	var results []struct {
		OK   float64 `bson:"ok"`
		Idx  int32   `bson:"idx"`
		N    int32   `bson:"n"`
		Code int32   `bson:"code"`
	}
	if err := cur.All(c, &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 6 || results[5].OK != 0 || results[5].Idx != 5 || results[5].Code != 11000 || results[4].N != 1 {
		t.Fatalf("results %+v; want 5 inserts and the duplicate key error of operation 5", results)
	}
	if n := srv.Stats().Commands["getMore"]; n != 1 {
		t.Errorf("%d getMores; want one for the results after the first batch of 2", n)
	}
	// batchSize 0: an empty first batch, the results all in the cursor.
	var empty struct {
		Cursor struct {
			ID         int64      `bson:"id"`
			FirstBatch []bson.Raw `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	ops = bson.A{bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 20}}}}}
	if err := admin.RunCommand(c, cmd(bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 0}}})).Decode(&empty); err != nil {
		t.Fatal(err)
	}
	if empty.Cursor.ID == 0 || len(empty.Cursor.FirstBatch) != 0 {
		t.Errorf("batchSize 0: cursor %d with %d results first; want an open cursor and an empty first batch", empty.Cursor.ID, len(empty.Cursor.FirstBatch))
	}

	// errorsOnly: the cursor has the failed operations only; the counts
	// are all there.
	var reply struct {
		Cursor struct {
			ID         int64      `bson:"id"`
			NS         string     `bson:"ns"`
			FirstBatch []bson.Raw `bson:"firstBatch"`
		} `bson:"cursor"`
		NErrors   int32 `bson:"nErrors"`
		NInserted int32 `bson:"nInserted"`
	}
	ops = bson.A{
		bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 10}}}},
		bson.D{{Key: "insert", Value: 0}, {Key: "document", Value: bson.D{{Key: "_id", Value: 10}}}},
		bson.D{{Key: "delete", Value: 0}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 10}}}, {Key: "multi", Value: false}},
	}
	if err := admin.RunCommand(c, cmd(bson.E{Key: "errorsOnly", Value: true})).Decode(&reply); err != nil {
		t.Fatal(err)
	}
	if reply.Cursor.ID != 0 || reply.Cursor.NS != "admin.$cmd.bulkWrite" || len(reply.Cursor.FirstBatch) != 1 || reply.NErrors != 1 || reply.NInserted != 1 {
		t.Fatalf("errorsOnly reply %+v; want the one error in a closed cursor, 1 error and 1 insert counted", reply)
	}

	for _, tc := range []struct {
		name string
		db   string
		cmd  bson.D
		code int
		msg  string
	}{
		{"not on admin", "db", cmd(), 13, "bulkWrite may only be run against the admin database"},
		{"no nsInfo", "admin", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: ops}}, 2, "'bulkWrite.nsInfo' is missing"},
		{"index out of nsInfo", "admin", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: bson.A{bson.D{{Key: "insert", Value: 1}, {Key: "document", Value: bson.D{}}}}}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}}}, 2, "invalid nsInfo index 1"},
		{"unknown operation", "admin", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: bson.A{bson.D{{Key: "upsert", Value: 0}}}}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}}}, 9, "Unrecognized bulkWrite operation: 'upsert'"},
		{"no filter", "admin", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: bson.A{bson.D{{Key: "delete", Value: 0}}}}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "db.c"}}}}}, 40414, "'bulkWrite.ops.filter' is missing"},
		{"bad namespace", "admin", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: ops}, {Key: "nsInfo", Value: bson.A{bson.D{{Key: "ns", Value: "nodot"}}}}}, 73, "Invalid namespace specified 'nodot'"},
		{"unknown field", "admin", cmd(bson.E{Key: "frobnicate", Value: 1}), 40415, "'bulkWrite.frobnicate' is an unknown field"},
	} {
		err := client.Database(tc.db).RunCommand(c, tc.cmd).Err()
		wantCode(t, tc.name, err, tc.code, tc.msg)
	}

	old := connect(t, start(t).URI())
	err = old.Database("admin").RunCommand(c, cmd()).Err()
	wantCode(t, "bulkWrite on a MongoDB 7.0 server", err, 59, "no such command: 'bulkWrite'")
}

// TestDriverClientBulkWriteRetried: the driver retries a bulkWrite whose
// reply had a retryable write concern error, as a retryable write (same
// session and txnNumber), and the server, which ran its writes, does not
// run them again: every document is stored once, updated once. In a
// transaction, an aborted bulkWrite leaves nothing, and a failed operation
// aborts the transaction.
func TestDriverClientBulkWriteRetried(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 1, mongotest.WithVersion("8.0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	client := connect(t, rs.URI())
	c := ctx(t)
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"bulkWrite"}, Times: 1,
		WriteConcernError: bson.D{{Key: "code", Value: 262}, {Key: "errmsg", Value: "operation exceeded time limit"}}}); err != nil {
		t.Fatal(err)
	}
	writes := []mongo.ClientBulkWrite{
		{Database: "db", Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
		{Database: "db", Collection: "c", Model: mongo.NewClientUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})},
	}
	res, err := client.BulkWrite(c, writes)
	if err != nil {
		t.Fatalf("BulkWrite retried after a write concern error: %v", err)
	}
	if res.InsertedCount != 1 || res.ModifiedCount != 1 {
		t.Errorf("result %+v; want 1 inserted, 1 modified", res)
	}
	if n := rs.Primary().Stats().Commands["bulkWrite"]; n != 2 {
		t.Errorf("%d bulkWrite commands; want the failed one and its retry", n)
	}
	coll := client.Database("db").Collection("c")
	wantDocs(t, coll.Name(), collDocs(t, coll), `{"_id":1,"n":1}`)

	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(c)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sc := mongo.NewSessionContext(c, sess)
	if _, err := client.BulkWrite(sc, []mongo.ClientBulkWrite{{Database: "db", Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}})}}); err != nil {
		t.Fatalf("BulkWrite in a transaction: %v", err)
	}
	if err := sess.AbortTransaction(c); err != nil {
		t.Fatal(err)
	}
	wantDocs(t, coll.Name(), collDocs(t, coll), `{"_id":1,"n":1}`)

	// A failed operation aborts the transaction, as a write error does.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	_, err = client.BulkWrite(sc, []mongo.ClientBulkWrite{
		{Database: "db", Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 3}})},
		{Database: "db", Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}})},
	})
	var bwe mongo.ClientBulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 {
		t.Fatalf("BulkWrite of a duplicate key in a transaction: %v; want its write error", err)
	}
	wantCode(t, "the commit of the transaction", sess.CommitTransaction(c), 251, "")
	wantDocs(t, coll.Name(), collDocs(t, coll), `{"_id":1,"n":1}`)
}

// TestDriverClientBulkWriteThroughMongos: a mongos sends a bulkWrite to the
// shard of its namespaces' databases, and its results cursor is the
// mongos's; one whose databases are on different shards is refused with
// why, since mongotest's mongos does not split it.
func TestDriverClientBulkWriteThroughMongos(t *testing.T) {
	sc, err := mongotest.StartShardedCluster(1, 2, mongotest.WithVersion("8.0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	// Two databases of one shard, and one of the other.
	var same, other []string
	for i := 0; len(same) < 2 || len(other) < 1; i++ {
		db := fmt.Sprint("db", i)
		if sc.ShardOf(db) == 0 {
			same = append(same, db)
		} else {
			other = append(other, db)
		}
	}
	client := connect(t, sc.URI())
	c := ctx(t)
	insert := func(db string, id int) mongo.ClientBulkWrite {
		return mongo.ClientBulkWrite{Database: db, Collection: "c", Model: mongo.NewClientInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: id}})}
	}
	res, err := client.BulkWrite(c, []mongo.ClientBulkWrite{insert(same[0], 1), insert(same[1], 2)}, options.ClientBulkWrite().SetVerboseResults(true))
	if err != nil || res.InsertedCount != 2 || len(res.InsertResults) != 2 {
		t.Fatalf("BulkWrite on one shard: %+v, %v; want 2 inserted", res, err)
	}
	wantDocs(t, same[1], collDocs(t, client.Database(same[1]).Collection("c")), `{"_id":2}`)
	if n := sc.Shards()[0].Primary().Stats().Commands["bulkWrite"]; n != 1 {
		t.Errorf("shard0 ran %d bulkWrites, want 1", n)
	}

	_, err = client.BulkWrite(c, []mongo.ClientBulkWrite{insert(same[0], 3), insert(other[0], 3)})
	wantCode(t, "a bulkWrite across shards", err, 2, "mongotest does not implement a bulkWrite across shards")
}
