package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestIndexConflicts checks createIndexes against the indexes a collection
// has, as mongod's IndexCatalogImpl::_doesSpecConflictWithExisting decides:
// an index is identified by its name and by its signature (the key pattern,
// unique, sparse, the partial filter and the collation: since MongoDB 4.9,
// see jstests/core/index_signature.js and SERVER-47657), and the other
// options only tell an identical index from an equivalent one.
func TestIndexConflicts(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	create := func(specs ...bson.D) bson.Raw {
		t.Helper()
		a := bson.A{}
		for _, s := range specs {
			a = append(a, s)
		}
		return r.run(cmd("x", bson.E{Key: "createIndexes", Value: "ic"}, bson.E{Key: "indexes", Value: a}))
	}
	spec := func(key bson.D, name string, opts ...bson.E) bson.D {
		return append(bson.D{{Key: "key", Value: key}, {Key: "name", Value: name}}, opts...)
	}
	unique := bson.E{Key: "unique", Value: true}
	sparse := bson.E{Key: "sparse", Value: true}
	a1 := bson.D{{Key: "a", Value: 1}}
	checkOK(t, create(spec(a1, "a_1", unique, sparse)))

	for _, tc := range []struct {
		name string
		spec bson.D
		code int32
		msg  string
	}{
		// IndexOptionsConflict (85), "Index already exists with a
		// different name": the same signature and options under another
		// name.
		{"another name", spec(a1, "other", unique, sparse), 85,
			"Index already exists with a different name: a_1"},
		// IndexOptionsConflict (85): the same signature, other options,
		// another name.
		{"another name and options", spec(a1, "other", unique, sparse, bson.E{Key: "storageEngine", Value: bson.D{{Key: "wiredTiger", Value: bson.D{}}}}), 85,
			`An equivalent index already exists with a different name and options. Requested index: { v: 2, key: { a: 1 }, name: "other", unique: true, sparse: true, storageEngine: { wiredTiger: {} } }, existing index: { v: 2, key: { a: 1 }, name: "a_1", unique: true, sparse: true }`},
		// IndexKeySpecsConflict (86): the name of an index with another
		// key pattern, or another signature.
		{"the name, another key", spec(bson.D{{Key: "b", Value: 1}}, "a_1"), 86,
			`An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: { v: 2, key: { b: 1 }, name: "a_1" }, existing index: { v: 2, key: { a: 1 }, name: "a_1", unique: true, sparse: true }`},
		{"the name, not unique", spec(a1, "a_1", sparse), 86,
			`An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: { v: 2, key: { a: 1 }, name: "a_1", sparse: true }, existing index: { v: 2, key: { a: 1 }, name: "a_1", unique: true, sparse: true }`},
		// IndexOptionsConflict (85): the name and signature of an index,
		// other options.
		{"the name, other options", spec(a1, "a_1", unique, sparse, bson.E{Key: "storageEngine", Value: bson.D{{Key: "wiredTiger", Value: bson.D{}}}}), 85,
			`An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { a: 1 }, name: "a_1", unique: true, sparse: true, storageEngine: { wiredTiger: {} } }, existing index: { v: 2, key: { a: 1 }, name: "a_1", unique: true, sparse: true }`},
	} {
		reply := create(tc.spec)
		if msg := checkError(t, reply, tc.code, map[int32]string{85: "IndexOptionsConflict", 86: "IndexKeySpecsConflict"}[tc.code]); msg != tc.msg {
			t.Errorf("%s:\n got errmsg %s\nwant errmsg %s", tc.name, msg, tc.msg)
		}
	}

	// The identical index is no change: "all indexes already exist"; hidden
	// is no part of the comparison (populateOptionsMapForEqualityCheck).
	for _, s := range []bson.D{spec(a1, "a_1", unique, sparse), spec(a1, "a_1", unique, sparse, bson.E{Key: "hidden", Value: false})} {
		reply := create(s)
		checkOK(t, reply)
		if reply.Lookup("note").StringValue() != "all indexes already exist" || reply.Lookup("numIndexesAfter").AsInt64() != 2 {
			t.Errorf("creating %v again: %s", s, reply)
		}
	}
	// Another signature on the same key pattern is another index: not
	// unique, or not sparse, or with a partial filter.
	reply := create(spec(a1, "a_plain"), spec(a1, "a_unique", unique), spec(a1, "a_partial", bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 5}}}}}))
	checkOK(t, reply)
	if b, a := reply.Lookup("numIndexesBefore").AsInt64(), reply.Lookup("numIndexesAfter").AsInt64(); b != 2 || a != 5 {
		t.Errorf("three more signatures on {a: 1}: %s", reply)
	}
}

// TestHintHiddenIndex checks that a hidden index cannot be hinted, by name
// or by key pattern: mongod's planner leaves hidden indexes out, so the
// hint names none it has, BadValue "hint provided does not correspond to an
// existing index" (https://www.mongodb.com/docs/manual/core/index-hidden/).
// The driver's find, count and update all carry the hint.
func TestHintHiddenIndex(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("hh")
	c := ctx(t)
	if _, err := coll.Indexes().CreateMany(c, []mongo.IndexModel{
		{Keys: bson.D{{Key: "h", Value: 1}}, Options: options.Index().SetName("h_1").SetHidden(true)},
		{Keys: bson.D{{Key: "v", Value: 1}}, Options: options.Index().SetName("v_1")},
	}); err != nil {
		t.Fatalf("CreateMany: %v", err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}, {Key: "h", Value: 1}, {Key: "v", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	const msg = "hint provided does not correspond to an existing index"
	for _, hint := range []any{"h_1", bson.D{{Key: "h", Value: 1}}} {
		cur, err := coll.Find(c, bson.D{}, options.Find().SetHint(hint))
		if err == nil {
			cur.Close(c)
		}
		wantCode(t, "Find hinting the hidden index", err, 2, msg)
		_, err = coll.CountDocuments(c, bson.D{}, options.Count().SetHint(hint))
		wantCode(t, "CountDocuments hinting the hidden index", err, 2, msg)
		_, err = coll.UpdateOne(c, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateOne().SetHint(hint))
		wantCode(t, "UpdateOne hinting the hidden index", err, 2, msg)
	}
	// The index that is not hidden may be hinted.
	cur, err := coll.Find(c, bson.D{}, options.Find().SetHint("v_1"))
	if err != nil {
		t.Fatalf("Find hinting v_1: %v", err)
	}
	wantDocs(t, "Find hinting v_1", allRelaxed(t, cur), `{"_id":1,"h":1,"v":1}`)
}
