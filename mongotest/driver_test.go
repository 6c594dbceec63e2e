package mongotest_test

import (
	"slices"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDriverCRUD connects the official driver and runs the basic
// operations: the handshake, ping, inserts, a find iterated over several
// batches (getMore), a cursor closed early (killCursors), a filtered find,
// count, delete and drop.
func TestDriverCRUD(t *testing.T) {
	srv := start(t)
	client := connect(t, srv.URI())
	c := ctx(t)
	if err := client.Ping(c, nil); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	// The driver's first message on each connection is a legacy hello in
	// an OP_QUERY; its monitor goes on with hello in OP_MSG.
	st := srv.Stats()
	if st.OpQueries == 0 || st.Commands["isMaster"] == 0 {
		t.Errorf("no legacy hello in OP_QUERY: %+v", st)
	}
	t.Logf("stats after Ping: %+v", st)
	coll := client.Database("x").Collection("c")
	res, err := coll.InsertOne(c, bson.D{{Key: "n", Value: 0}, {Key: "kind", Value: "one"}})
	if err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	if _, ok := res.InsertedID.(bson.ObjectID); !ok {
		t.Errorf("InsertedID = %T, want an ObjectID", res.InsertedID)
	}
	var docs []any
	for i := 1; i <= 25; i++ {
		docs = append(docs, bson.D{{Key: "n", Value: i}, {Key: "kind", Value: []string{"even", "odd"}[i%2]}})
	}
	many, err := coll.InsertMany(c, docs)
	if err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	if len(many.InsertedIDs) != 25 {
		t.Fatalf("InsertMany inserted %d, want 25", len(many.InsertedIDs))
	}

	// All 26 documents, 4 at a time: 1 find and 6 getMores.
	before := srv.Stats().Commands["getMore"]
	cur, err := coll.Find(c, bson.D{}, options.Find().SetBatchSize(4))
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	var got []int
	for cur.Next(c) {
		got = append(got, int(cur.Current.Lookup("n").AsInt64()))
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("cursor: %v", err)
	}
	if err := cur.Close(c); err != nil {
		t.Fatalf("cursor Close: %v", err)
	}
	want := make([]int, 26)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Errorf("Find returned n = %v, want %v", got, want)
	}
	if n := srv.Stats().Commands["getMore"] - before; n != 6 {
		t.Errorf("%d getMores for 26 documents in batches of 4, want 6", n)
	}

	// A cursor closed before its end is killed on the server.
	cur, err = coll.Find(c, bson.D{{Key: "kind", Value: "odd"}}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatalf("Find odd: %v", err)
	}
	if !cur.Next(c) {
		t.Fatalf("no odd document: %v", cur.Err())
	}
	if kind := cur.Current.Lookup("kind").StringValue(); kind != "odd" {
		t.Errorf("filter {kind: odd} returned kind %q", kind)
	}
	if err := cur.Close(c); err != nil {
		t.Fatalf("cursor Close: %v", err)
	}
	if n := srv.Stats().Commands["killCursors"]; n != 1 {
		t.Errorf("killCursors sent %d times, want 1", n)
	}

	var one bson.M
	if err := coll.FindOne(c, bson.D{{Key: "n", Value: 7}}).Decode(&one); err != nil {
		t.Fatalf("FindOne: %v", err)
	}
	if one["kind"] != "odd" {
		t.Errorf("FindOne({n: 7}) = %v", one)
	}
	n, err := coll.EstimatedDocumentCount(c)
	if err != nil || n != 26 {
		t.Errorf("EstimatedDocumentCount = %d, %v; want 26", n, err)
	}
	del, err := coll.DeleteMany(c, bson.D{{Key: "kind", Value: "even"}})
	if err != nil || del.DeletedCount != 12 {
		t.Errorf("DeleteMany even = %+v, %v; want 12 deleted", del, err)
	}
	if err := coll.Drop(c); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if n, err := coll.EstimatedDocumentCount(c); err != nil || n != 0 {
		t.Errorf("after Drop: EstimatedDocumentCount = %d, %v; want 0", n, err)
	}
}

// TestDriverBuildInfoAndListDatabases checks buildInfo's version against
// the wire version, and listDatabases.
func TestDriverBuildInfoAndListDatabases(t *testing.T) {
	for _, tc := range []struct {
		opts    []mongotest.Option
		version string
		wire    int32
	}{
		{nil, "7.0.0", 21},
		{[]mongotest.Option{mongotest.WithWireVersions(0, 25)}, "8.0.0", 25},
		{[]mongotest.Option{mongotest.WithWireVersions(6, 17)}, "6.0.0", 17},
		{[]mongotest.Option{mongotest.WithVersion("8.2")}, "8.2.0", 27},
		{[]mongotest.Option{mongotest.WithVersion("5.3")}, "5.3.0", 16},
		{[]mongotest.Option{mongotest.WithVersion("4.4")}, "4.4.0", 9},
	} {
		t.Run(tc.version, func(t *testing.T) {
			srv := start(t, tc.opts...)
			client := connect(t, srv.URI())
			c := ctx(t)
			var info struct {
				Version      string  `bson:"version"`
				VersionArray []int32 `bson:"versionArray"`
			}
			if err := client.Database("admin").RunCommand(c, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
				t.Fatalf("buildInfo: %v", err)
			}
			if info.Version != tc.version {
				t.Errorf("buildInfo version = %q, want %q", info.Version, tc.version)
			}
			var hello struct {
				MaxWireVersion int32 `bson:"maxWireVersion"`
			}
			if err := client.Database("admin").RunCommand(c, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
				t.Fatalf("hello: %v", err)
			}
			if hello.MaxWireVersion != tc.wire {
				t.Errorf("maxWireVersion = %d, want %d", hello.MaxWireVersion, tc.wire)
			}
		})
	}

	srv := start(t)
	client := connect(t, srv.URI())
	c := ctx(t)
	for _, db := range []string{"b", "a", "c"} {
		if _, err := client.Database(db).Collection("t").InsertOne(c, bson.D{{Key: "x", Value: 1}}); err != nil {
			t.Fatalf("InsertOne in %s: %v", db, err)
		}
	}
	names, err := client.ListDatabaseNames(c, bson.D{})
	if err != nil {
		t.Fatalf("ListDatabaseNames: %v", err)
	}
	// With the databases every mongod has (see TestListDatabasesHasTheSystemDatabases).
	if !slices.Equal(names, []string{"a", "admin", "b", "c", "config", "local"}) {
		t.Errorf("ListDatabaseNames = %v, want [a admin b c config local]", names)
	}
	res, err := client.ListDatabases(c, bson.D{{Key: "name", Value: "b"}})
	if err != nil {
		t.Fatalf("ListDatabases: %v", err)
	}
	if len(res.Databases) != 1 || res.Databases[0].Name != "b" || res.Databases[0].SizeOnDisk == 0 || res.Databases[0].Empty {
		t.Errorf("ListDatabases({name: b}) = %+v", res.Databases)
	}
	colls, err := client.Database("a").ListCollectionNames(c, bson.D{})
	if err != nil || !slices.Equal(colls, []string{"t"}) {
		t.Errorf("ListCollectionNames = %v, %v; want [t]", colls, err)
	}
}
