package mongotest_test

import (
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// rangeDocs are the documents the range tests query: numbers of each type,
// NaN (double and decimal), a string, MinKey, MaxKey, null, a missing
// field and an array.
func rangeDocs(t *testing.T) bson.A {
	t.Helper()
	decNaN, err := bson.ParseDecimal128("NaN")
	if err != nil {
		t.Fatal(err)
	}
	return bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: -5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 0.0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: math.NaN()}},
		bson.D{{Key: "_id", Value: 4}, {Key: "v", Value: int64(7)}},
		bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: "a"}},
		bson.D{{Key: "_id", Value: 6}, {Key: "v", Value: bson.MinKey{}}},
		bson.D{{Key: "_id", Value: 7}, {Key: "v", Value: bson.MaxKey{}}},
		bson.D{{Key: "_id", Value: 8}, {Key: "v", Value: nil}},
		bson.D{{Key: "_id", Value: 9}},
		bson.D{{Key: "_id", Value: 10}, {Key: "v", Value: bson.A{math.NaN(), "z"}}},
		bson.D{{Key: "_id", Value: 11}, {Key: "v", Value: decNaN}},
	}
}

// rangeCases are range predicates on v with the _id of the documents of
// rangeDocs that mongod matches. mongod's ComparisonMatchExpressionBase
// (expression_leaf.cpp) compares only values of one canonical type (all
// numbers are one), but for MinKey and MaxKey operands, and treats NaN
// apart: "NaN is equal to NaN but otherwise always compares to false", so
// $lte/$gte NaN match NaN only and $lt/$gt NaN match nothing, although NaN
// sorts below every number. See
// https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/
// and https://www.mongodb.com/docs/manual/reference/operator/query/lt/.
var rangeCases = []struct {
	name string
	pred bson.D
	want string
}{
	{"$lt 0", bson.D{{Key: "$lt", Value: 0}}, "1"},
	{"$lte 0", bson.D{{Key: "$lte", Value: 0}}, "1 2"},
	{"$gt 0", bson.D{{Key: "$gt", Value: 0}}, "4"},
	{"$gte -5", bson.D{{Key: "$gte", Value: int64(-5)}}, "1 2 4"},
	{"$gt NaN", bson.D{{Key: "$gt", Value: math.NaN()}}, ""},
	{"$gte NaN", bson.D{{Key: "$gte", Value: math.NaN()}}, "3 10 11"},
	{"$lt NaN", bson.D{{Key: "$lt", Value: math.NaN()}}, ""},
	{"$lte NaN", bson.D{{Key: "$lte", Value: math.NaN()}}, "3 10 11"},
	{"$eq NaN", bson.D{{Key: "$eq", Value: math.NaN()}}, "3 10 11"},
	{"$gt 5 and strings", bson.D{{Key: "$gt", Value: 5}}, "4"},
	{"$lt a and numbers", bson.D{{Key: "$lt", Value: "a"}}, ""},
	{"$gte a", bson.D{{Key: "$gte", Value: "a"}}, "5 10"},
	{"$lt MaxKey", bson.D{{Key: "$lt", Value: bson.MaxKey{}}}, "1 2 3 4 5 6 8 10 11"},
	{"$gt MinKey", bson.D{{Key: "$gt", Value: bson.MinKey{}}}, "1 2 3 4 5 7 8 10 11"},
	{"$gte MaxKey", bson.D{{Key: "$gte", Value: bson.MaxKey{}}}, "7"},
	{"$lt MinKey", bson.D{{Key: "$lt", Value: bson.MinKey{}}}, ""},
	{"$lt 0, $gte NaN", bson.D{{Key: "$lt", Value: 0}, {Key: "$gte", Value: math.NaN()}}, ""},
}

// TestRangeSemantics runs each range predicate through find, count and
// $match, which share one matcher, and checks the documents mongod
// matches.
func TestRangeSemantics(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "r"}, bson.E{Key: "documents", Value: rangeDocs(t)})))
	for _, tc := range rangeCases {
		filter := bson.D{{Key: "v", Value: tc.pred}}
		if got := findIDs(t, r, "r", bson.E{Key: "filter", Value: filter}); got != tc.want {
			t.Errorf("find %s: _id %q, want %q", tc.name, got, tc.want)
		}
		reply := r.run(cmd("x", bson.E{Key: "count", Value: "r"}, bson.E{Key: "query", Value: filter}))
		checkOK(t, reply)
		if got, want := reply.Lookup("n").AsInt64(), int64(len(idList(tc.want))); got != want {
			t.Errorf("count %s: n %d, want %d", tc.name, got, want)
		}
		var ids []string
		for _, d := range aggregate(t, r, "r", bson.D{{Key: "$match", Value: filter}}, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}}}}) {
			ids = append(ids, d[len(`{"_id":`):len(d)-1])
		}
		if got := joinIDs(ids); got != tc.want {
			t.Errorf("$match %s: _id %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRangeUpdatesDriver checks, through the official driver, that
// updateMany and deleteMany select the documents find does: a NaN is
// not below 0 (mongod updates one document of these, not two).
func TestRangeUpdatesDriver(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("nan")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: -1.5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: math.NaN()}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: "-"}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	res, err := coll.UpdateMany(c, bson.D{{Key: "v", Value: bson.D{{Key: "$lt", Value: 0}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "neg", Value: true}}}})
	if err != nil {
		t.Fatalf("UpdateMany: %v", err)
	}
	if res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Errorf("UpdateMany {v: {$lt: 0}}: matched %d, modified %d; want 1, 1", res.MatchedCount, res.ModifiedCount)
	}
	n, err := coll.CountDocuments(c, bson.D{{Key: "v", Value: bson.D{{Key: "$gt", Value: math.NaN()}}}})
	if err != nil || n != 0 {
		t.Errorf("CountDocuments {v: {$gt: NaN}} = %d, %v; want 0", n, err)
	}
	del, err := coll.DeleteMany(c, bson.D{{Key: "v", Value: bson.D{{Key: "$lte", Value: math.NaN()}}}})
	if err != nil || del.DeletedCount != 1 {
		t.Errorf("DeleteMany {v: {$lte: NaN}}: %v, %v; want 1 deleted", del, err)
	}
	wantDocs(t, "after the writes", collDocs(t, coll), `{"_id":1,"v":-1.5,"neg":true}`, `{"_id":3,"v":"-"}`)

	// Sorting still puts NaN below every number, as mongod does.
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 4}, {Key: "v", Value: math.NaN()}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(c, bson.D{}, options.Find().SetSort(bson.D{{Key: "v", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	wantDocs(t, "sorted by v", allRelaxed(t, cur), `{"_id":4,"v":{"$numberDouble":"NaN"}}`, `{"_id":1,"v":-1.5,"neg":true}`, `{"_id":3,"v":"-"}`)
}

// idList splits a list of _id as the range cases write it.
func idList(ids string) []string { return strings.Fields(ids) }

// joinIDs joins _id values as the range cases write them.
func joinIDs(ids []string) string { return strings.Join(ids, " ") }
