package mongotest_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// insertWith runs an insert of {_id: id} into x.wc with the write concern
// wc.
func insertWith(r *rawConn, id int, wc any) bson.Raw {
	return r.run(cmd("x", bson.E{Key: "insert", Value: "wc"},
		bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
		bson.E{Key: "writeConcern", Value: wc}))
}

// countIn returns the number of documents of x.<coll>.
func countIn(t *testing.T, r *rawConn, coll string) int64 {
	t.Helper()
	reply := r.run(cmd("x", bson.E{Key: "count", Value: coll}))
	checkOK(t, reply)
	return reply.Lookup("n").AsInt64()
}

// findWithReadConcern runs a find on x.wc with the read concern rc and
// more fields.
func findWithReadConcern(r *rawConn, rc any, fields ...bson.E) bson.Raw {
	return r.run(cmd("x", append([]bson.E{{Key: "find", Value: "wc"}, {Key: "readConcern", Value: rc}}, fields...)...))
}

// concernRefusal is a command that mongod refuses for its read or write
// concern, with the code, codeName and errmsg of the refusal.
type concernRefusal struct {
	name     string
	run      func(r *rawConn) bson.Raw
	code     int32
	codeName string
	msg      string
}

func checkRefusals(t *testing.T, r *rawConn, cases []concernRefusal) {
	t.Helper()
	for _, tc := range cases {
		if msg := checkError(t, tc.run(r), tc.code, tc.codeName); msg != tc.msg {
			t.Errorf("%s: errmsg %q, want %q", tc.name, msg, tc.msg)
		}
	}
}

// TestWriteConcernStandalone checks the write concerns a standalone mongod
// takes and those it refuses, before the write.
func TestWriteConcernStandalone(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	// w: 0, 1 and "majority" are fine on a standalone
	// (https://www.mongodb.com/docs/manual/reference/write-concern/), and
	// so are j, wtimeout, and fields mongod ignores.
	for i, wc := range []bson.D{
		{{Key: "w", Value: 1}}, {{Key: "w", Value: "majority"}}, {{Key: "w", Value: 0}},
		{{Key: "w", Value: 1}, {Key: "j", Value: true}, {Key: "wtimeout", Value: 100}},
		{{Key: "fsync", Value: true}}, {}, {{Key: "w", Value: 1.0}, {Key: "wtimeout", Value: "ignored"}},
		{{Key: "getLastError", Value: 1}, {Key: "wOpTime", Value: 1}, {Key: "wElectionId", Value: 1}, {Key: "provenance", Value: "clientSupplied"}},
	} {
		reply := insertWith(r, i, wc)
		checkOK(t, reply)
		if reply.Lookup("writeConcernError").Type != 0 {
			t.Errorf("insert with writeConcern %v: %s", wc, reply)
		}
	}
	if n := countIn(t, r, "wc"); n != 8 {
		t.Fatalf("%d documents after the accepted inserts, want 8", n)
	}
	insert := func(wc any) func(r *rawConn) bson.Raw {
		return func(r *rawConn) bson.Raw { return insertWith(r, 100, wc) }
	}
	checkRefusals(t, r, []concernRefusal{
		// validateWriteConcern (src/mongo/db/write_concern.cpp).
		{"w: 2", insert(bson.D{{Key: "w", Value: 2}}), 2, "BadValue", "cannot use 'w' > 1 when a host is not replicated"},
		{"w: a mode", insert(bson.D{{Key: "w", Value: "nosuchtag"}}), 2, "BadValue", "cannot use non-majority 'w' mode nosuchtag when a host is not a member of a replica set"},
		// deserializeWriteConcernW (src/mongo/db/write_concern_idl.cpp).
		{"w: -1", insert(bson.D{{Key: "w", Value: -1}}), 9, "FailedToParse", "w has to be a non-negative number and not greater than 50; found: -1"},
		{"w: 51", insert(bson.D{{Key: "w", Value: int64(51)}}), 9, "FailedToParse", "w has to be a non-negative number and not greater than 50; found: 51"},
		{"w: NaN", insert(bson.D{{Key: "w", Value: math.NaN()}}), 9, "FailedToParse", "w cannot be NaN"},
		{"w: true", insert(bson.D{{Key: "w", Value: true}}), 9, "FailedToParse", "w has to be a number, string, or object; found: bool"},
		// WriteConcernOptions::parse and the WriteConcernIdl parser
		// (strict), src/mongo/db/write_concern_options.cpp and .idl.
		{"j and fsync", insert(bson.D{{Key: "j", Value: true}, {Key: "fsync", Value: true}}), 9, "FailedToParse", "fsync and j options cannot be used together"},
		{"j: a string", insert(bson.D{{Key: "j", Value: "yes"}}), 14, "TypeMismatch", "BSON field 'writeConcern.j' is the wrong type 'string', expected types '[bool, long, int, decimal, double]'"},
		{"an unknown field", insert(bson.D{{Key: "w", Value: 1}, {Key: "x", Value: 1}}), 40415, "IDLUnknownField", "BSON field 'writeConcern.x' is an unknown field."},
		{"wtimeout past int32", insert(bson.D{{Key: "wtimeout", Value: int64(1) << 31}}), 9, "FailedToParse", "wtimeout must be a 32-bit integer"},
		// bsonExtractTypedField, from WriteConcernOptions::extractWCFromCommand.
		{"not a document", insert(5), 14, "TypeMismatch", `"writeConcern" had the wrong type. Expected object, found int`},
		// A command that takes no write concern refuses one: InvalidOptions.
		{"find with a write concern", func(r *rawConn) bson.Raw {
			return r.run(cmd("x", bson.E{Key: "find", Value: "wc"}, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}))
		}, 72, "InvalidOptions", "Command does not support writeConcern"},
	})
	if n := countIn(t, r, "wc"); n != 8 {
		t.Errorf("%d documents after the refused inserts, want 8: a refused write concern refuses the write", n)
	}
}

// TestReadConcernStandalone checks the read concerns a standalone takes and
// refuses (src/mongo/db/repl/read_concern_args.cpp, ReadConcernArgs::parse,
// and read_concern_mongod.cpp, waitForReadConcernImpl).
func TestReadConcernStandalone(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	for _, level := range []string{"local", "majority", "available"} {
		checkOK(t, findWithReadConcern(r, bson.D{{Key: "level", Value: level}}))
	}
	checkOK(t, findWithReadConcern(r, bson.D{}))
	find := func(rc any) func(r *rawConn) bson.Raw {
		return func(r *rawConn) bson.Raw { return findWithReadConcern(r, rc) }
	}
	checkRefusals(t, r, []concernRefusal{
		{"an unknown level", find(bson.D{{Key: "level", Value: "nope"}}), 9, "FailedToParse",
			"readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'"},
		{"a level of another type", find(bson.D{{Key: "level", Value: 1}}), 14, "TypeMismatch", `"level" had the wrong type. Expected string, found int`},
		{"not a document", find("majority"), 9, "FailedToParse", "readConcern field should be an object"},
		{"an unknown field", find(bson.D{{Key: "level", Value: "local"}, {Key: "x", Value: 1}}), 72, "InvalidOptions", "Unrecognized option in readConcern: x"},
		{"atClusterTime without snapshot", find(bson.D{{Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), 72, "InvalidOptions",
			"atClusterTime field can be set only if level is equal to snapshot"},
		// A standalone has no replication: linearizable and snapshot need
		// a replica set member (NotAReplicaSet, 123), afterClusterTime
		// replication (IllegalOperation, 20).
		{"linearizable", find(bson.D{{Key: "level", Value: "linearizable"}}), 123, "NotAReplicaSet", "node needs to be a replica set member to use read concern"},
		{"snapshot", find(bson.D{{Key: "level", Value: "snapshot"}}), 123, "NotAReplicaSet", "node needs to be a replica set member to use readConcern: snapshot"},
		{"afterClusterTime", find(bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), 20, "IllegalOperation",
			"Cannot specify afterClusterTime readConcern without replication enabled"},
	})
}

// TestConcernsReplicaSet checks write and read concerns on a replica set
// of three members, one an arbiter: two members bear data.
func TestConcernsReplicaSet(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs", 3, mongotest.WithMember(2, mongotest.Member{Arbiter: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	r := dialRaw(t, rs.Primary())
	for i, wc := range []bson.D{{{Key: "w", Value: 2}}, {{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: 1000}}, {{Key: "w", Value: 1}, {Key: "j", Value: true}}} {
		reply := insertWith(r, i, wc)
		checkOK(t, reply)
		if reply.Lookup("writeConcernError").Type != 0 {
			t.Errorf("insert with writeConcern %v: %s", wc, reply)
		}
	}
	// More members than bear data: UnsatisfiableWriteConcern (100), and
	// a mode the configuration does not have: UnknownReplWriteConcern
	// (79), both as a writeConcernError of a write that is applied, with
	// the write concern in errInfo
	// (https://www.mongodb.com/docs/manual/reference/write-concern/ and the
	// read-write-concern specification's examples).
	for i, tc := range []struct {
		wc   bson.D
		want string
	}{
		{bson.D{{Key: "w", Value: 3}},
			`{"code":100,"codeName":"UnsatisfiableWriteConcern","errmsg":"Not enough data-bearing nodes","errInfo":{"writeConcern":{"w":3,"wtimeout":0,"provenance":"clientSupplied"}}}`},
		{bson.D{{Key: "w", Value: "nosuchtag"}, {Key: "j", Value: true}},
			`{"code":79,"codeName":"UnknownReplWriteConcern","errmsg":"No write concern mode named 'nosuchtag' found in replica set configuration","errInfo":{"writeConcern":{"w":"nosuchtag","j":true,"wtimeout":0,"provenance":"clientSupplied"}}}`},
	} {
		reply := insertWith(r, 10+i, tc.wc)
		checkOK(t, reply)
		if n := reply.Lookup("n").AsInt64(); n != 1 {
			t.Errorf("insert with writeConcern %v: n %d, want 1", tc.wc, n)
		}
		wce, err := reply.LookupErr("writeConcernError")
		if err != nil {
			t.Errorf("insert with writeConcern %v: no writeConcernError in %s", tc.wc, reply)
			continue
		}
		if got := relaxed(t, wce.Document()); got != tc.want {
			t.Errorf("insert with writeConcern %v: writeConcernError\n got %s\nwant %s", tc.wc, got, tc.want)
		}
	}
	if n := countIn(t, r, "wc"); n != 5 {
		t.Errorf("%d documents, want 5: a writeConcernError does not undo the write", n)
	}

	// Read concerns: linearizable reads on the primary only (NotWritablePrimary
	// on a secondary); snapshot outside a transaction is not implemented.
	checkOK(t, findWithReadConcern(r, bson.D{{Key: "level", Value: "linearizable"}}))
	checkOK(t, findWithReadConcern(r, bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}))
	secondary := dialRaw(t, rs.Members()[1])
	secondaryOK := bson.E{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}
	checkOK(t, findWithReadConcern(secondary, bson.D{{Key: "level", Value: "majority"}}, secondaryOK))
	if msg := checkError(t, findWithReadConcern(secondary, bson.D{{Key: "level", Value: "linearizable"}}, secondaryOK), 10107, "NotWritablePrimary"); msg != "cannot satisfy linearizable read concern on non-primary node" {
		t.Errorf("linearizable on a secondary: errmsg %q", msg)
	}
	if msg := checkError(t, findWithReadConcern(r, bson.D{{Key: "level", Value: "snapshot"}}), 2, "BadValue"); msg != "mongotest does not implement readConcern level snapshot outside transactions" {
		t.Errorf("snapshot: errmsg %q", msg)
	}
}

// TestConcernsDriver runs the official driver with write concerns that
// mongod refuses or cannot satisfy, and a read concern level it refuses.
func TestConcernsDriver(t *testing.T) {
	srv := start(t)
	c := ctx(t)
	client := connect(t, srv.URI())
	coll := client.Database("x").Collection("wcd", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 2}))
	_, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}})
	wantCode(t, "InsertOne with w: 2 on a standalone", err, 2, "cannot use 'w' > 1 when a host is not replicated")
	lin := client.Database("x").Collection("wcd", options.Collection().SetReadConcern(readconcern.Linearizable()))
	_, err = lin.CountDocuments(c, bson.D{})
	wantCode(t, "CountDocuments linearizable on a standalone", err, 123, "node needs to be a replica set member to use read concern")

	rs, err := mongotest.StartReplicaSet("rs", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	rsClient := connect(t, rs.URI())
	w5 := rsClient.Database("x").Collection("wcd", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 5}))
	_, err = w5.InsertOne(c, bson.D{{Key: "_id", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 100 || we.WriteConcernError.Message != "Not enough data-bearing nodes" {
		t.Errorf("InsertOne with w: 5 on three members: %v; want a WriteConcernError 100", err)
	}
	n, err := rsClient.Database("x").Collection("wcd", options.Collection().SetReadPreference(readpref.Primary())).CountDocuments(c, bson.D{})
	if err != nil || n != 1 {
		t.Errorf("CountDocuments after the insert with w: 5 = %d, %v; want 1: the write is applied", n, err)
	}
	tagged := rsClient.Database("x").Collection("wcd", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: "nosuchtag"}))
	_, err = tagged.InsertOne(c, bson.D{{Key: "_id", Value: 2}})
	wantCode(t, "InsertOne with w: nosuchtag", err, 79, "No write concern mode named 'nosuchtag' found in replica set configuration")
}

// TestWriteConcernWaitsForMembers checks that a write concern waits for
// the members it counts, as mongod's awaitReplication does: with members
// down, w fails with WriteConcernFailed (64, "waiting for replication timed
// out", errInfo.wtimeout) once wtimeout passes, the write applied
// (https://www.mongodb.com/docs/manual/reference/write-concern/#wtimeout),
// and without wtimeout it waits until they are back. "majority" counts a
// majority of the voting members that bear data.
func TestWriteConcernWaitsForMembers(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	if err := rs.Stop(2); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, rs.Primary())
	// Two of three members up: a majority.
	reply := insertWith(r, 1, bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: 5000}})
	checkOK(t, reply)
	if reply.Lookup("writeConcernError").Type != 0 {
		t.Errorf("w: majority with two of three members: %s", reply)
	}
	reply = insertWith(r, 2, bson.D{{Key: "w", Value: 3}, {Key: "wtimeout", Value: 50}})
	checkOK(t, reply)
	want := `{"code":64,"codeName":"WriteConcernFailed","errmsg":"waiting for replication timed out","errInfo":{"wtimeout":true,"writeConcern":{"w":3,"wtimeout":50,"provenance":"clientSupplied"}}}`
	if wce, err := reply.LookupErr("writeConcernError"); err != nil || relaxed(t, wce.Document()) != want {
		t.Errorf("w: 3 with a member down:\n got %s\nwant writeConcernError %s", reply, want)
	}
	// Without wtimeout, the write waits until the member is back.
	done := make(chan bson.Raw, 1)
	r2 := dialRaw(t, rs.Primary())
	go func() { done <- insertWith(r2, 3, bson.D{{Key: "w", Value: 3}}) }()
	select {
	case reply := <-done:
		t.Fatalf("w: 3 with a member down answered before the member came back: %s", reply)
	default:
	}
	if err := rs.Restart(2); err != nil {
		t.Fatal(err)
	}
	select {
	case reply := <-done:
		checkOK(t, reply)
		if reply.Lookup("writeConcernError").Type != 0 {
			t.Errorf("w: 3 once the member is back: %s", reply)
		}
	case <-time.After(testTimeout):
		t.Fatal("w: 3 did not return once the member was back")
	}
	if n := countIn(t, r, "wc"); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}
}
