package mongotest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The tests below run the official driver's CRUD calls against the server
// and check that each returns what MongoDB returns: the documents, in
// MongoDB's order and shape, and the counts of the replies.

// relaxed returns doc as relaxed extended JSON, the form the expectations
// below are written in: {"_id":1,"a":"x","f":2.0}.
func relaxed(t *testing.T, doc bson.Raw) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		t.Fatalf("MarshalExtJSON(%s): %v", doc, err)
	}
	return string(b)
}

// allRelaxed reads every document of cur as relaxed extended JSON.
func allRelaxed(t *testing.T, cur *mongo.Cursor) []string {
	t.Helper()
	c := ctx(t)
	defer cur.Close(c)
	var out []string
	for cur.Next(c) {
		out = append(out, relaxed(t, cur.Current))
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("cursor: %v", err)
	}
	return out
}

// wantDocs checks that got lists the documents want, in order.
func wantDocs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// collDocs returns every document of coll in natural order.
func collDocs(t *testing.T, coll *mongo.Collection) []string {
	t.Helper()
	cur, err := coll.Find(ctx(t), bson.D{})
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	return allRelaxed(t, cur)
}

// serverCode returns the code of the server error err, 0 if it is none.
func serverCode(err error) int {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return int(ce.Code)
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		if len(we.WriteErrors) > 0 {
			return we.WriteErrors[0].Code
		}
		if we.WriteConcernError != nil {
			return we.WriteConcernError.Code
		}
	}
	var be mongo.BulkWriteException
	if errors.As(err, &be) && len(be.WriteErrors) > 0 {
		return be.WriteErrors[0].Code
	}
	return 0
}

// wantCode checks that err is a server error with code whose message
// holds msg.
func wantCode(t *testing.T, what string, err error, code int, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded; want error code %d", what, code)
		return
	}
	if got := serverCode(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: %v (code %d); want code %d with %q", what, err, got, code, msg)
	}
}

func TestDriverUpdate(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "a"}, {Key: "n", Value: 1}, {Key: "tags", Value: bson.A{"x"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "b"}, {Key: "n", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "c"}, {Key: "n", Value: 3}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	check := func(what string, res *mongo.UpdateResult, err error, matched, modified, upserted int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.MatchedCount != matched || res.ModifiedCount != modified || res.UpsertedCount != upserted {
			t.Errorf("%s: matched %d, modified %d, upserted %d; want %d, %d, %d",
				what, res.MatchedCount, res.ModifiedCount, res.UpsertedCount, matched, modified, upserted)
		}
	}

	res, err := coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "name", Value: "A"}, {Key: "sub.deep", Value: true}}},
		{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}},
		{Key: "$push", Value: bson.D{{Key: "tags", Value: "y"}}},
	})
	check("UpdateOne $set $inc $push", res, err, 1, 1, 0)
	// Setting a value a field already has modifies nothing.
	res, err = coll.UpdateOne(c, bson.D{{Key: "name", Value: "A"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 11}}}})
	check("UpdateOne to the same value", res, err, 1, 0, 0)
	res, err = coll.UpdateMany(c, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 2}, {Key: "$lt", Value: 11}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1.5}}}, {Key: "$unset", Value: bson.D{{Key: "name", Value: ""}}}})
	check("UpdateMany $inc $unset", res, err, 2, 2, 0)
	res, err = coll.ReplaceOne(c, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "name", Value: "two"}})
	check("ReplaceOne", res, err, 1, 1, 0)
	wantDocs(t, "after the updates", collDocs(t, coll),
		`{"_id":1,"name":"A","n":11,"tags":["x","y"],"sub":{"deep":true}}`,
		`{"_id":2,"name":"two"}`,
		`{"_id":3,"n":4.5}`)

	// Upserts: the new document takes the query's equalities, then the
	// update; new fields come in the order of their names, after _id.
	res, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 9}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "z"}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: true}}}},
		options.UpdateOne().SetUpsert(true))
	check("UpdateOne upsert", res, err, 0, 0, 1)
	if res.UpsertedID != int32(9) {
		t.Errorf("UpsertedID = %v (%T), want int32 9", res.UpsertedID, res.UpsertedID)
	}
	// With a match, $setOnInsert does nothing.
	res, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 9}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: false}}}}, options.UpdateOne().SetUpsert(true))
	check("UpdateOne upsert that matches", res, err, 1, 0, 0)
	res, err = coll.UpdateMany(c, bson.D{{Key: "k", Value: "v"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: 100}}}, {Key: "m.x", Value: bson.D{{Key: "$eq", Value: 5}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}, options.UpdateMany().SetUpsert(true))
	check("UpdateMany upsert", res, err, 0, 0, 1)
	newID, ok := res.UpsertedID.(bson.ObjectID)
	if !ok {
		t.Fatalf("UpsertedID = %v (%T), want an ObjectID", res.UpsertedID, res.UpsertedID)
	}
	res, err = coll.ReplaceOne(c, bson.D{{Key: "name", Value: "none"}}, bson.D{{Key: "name", Value: "new"}}, options.Replace().SetUpsert(true))
	check("ReplaceOne upsert", res, err, 0, 0, 1)
	replacedID, ok := res.UpsertedID.(bson.ObjectID)
	if !ok {
		t.Fatalf("UpsertedID = %v (%T), want an ObjectID", res.UpsertedID, res.UpsertedID)
	}
	got := collDocs(t, coll)
	wantDocs(t, "after the upserts", got[3:],
		`{"_id":9,"created":true,"name":"z"}`,
		`{"_id":{"$oid":"`+newID.Hex()+`"},"k":"v","m":{"x":5},"b":1}`,
		`{"_id":{"$oid":"`+replacedID.Hex()+`"},"name":"new"}`)

	// Refusals, as mongod words them.
	_, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: 5}}}})
	wantCode(t, "$set of _id", err, 66, "Performing an update on the path '_id' would modify the immutable field '_id'")
	_, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "name", Value: 1}}}})
	wantCode(t, "$inc of a string", err, 14, "Cannot apply $inc to a value of non-numeric type")
	_, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	wantCode(t, "two operators on one path", err, 40, "Updating the path 'n' would create a conflict at 'n'")
	_, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$frob", Value: bson.D{{Key: "a", Value: 1}}}})
	wantCode(t, "an unknown update operator", err, 9, "Unknown modifier: $frob")
	_, err = coll.UpdateOne(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name.first", Value: "x"}}}})
	wantCode(t, "a path through a string", err, 28, "Cannot create field 'first' in element {name: \"A\"}")
}

func TestDriverDelete(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	c := ctx(t)
	var docs []any
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: i % 4}})
	}
	if _, err := coll.InsertMany(c, docs); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	res, err := coll.DeleteOne(c, bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 1}}}})
	if err != nil || res.DeletedCount != 1 {
		t.Fatalf("DeleteOne: %+v, %v", res, err)
	}
	res, err = coll.DeleteMany(c, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "n", Value: 0}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{7, 8, 100}}}}},
	}}})
	if err != nil || res.DeletedCount != 4 { // 0, 4, 8 and 7
		t.Fatalf("DeleteMany: %+v, %v", res, err)
	}
	wantDocs(t, "left", collDocs(t, coll),
		`{"_id":1,"n":1}`, `{"_id":3,"n":3}`, `{"_id":5,"n":1}`, `{"_id":6,"n":2}`, `{"_id":9,"n":1}`)
	res, err = coll.DeleteMany(c, bson.D{{Key: "nothing", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil || res.DeletedCount != 0 {
		t.Errorf("DeleteMany of nothing: %+v, %v", res, err)
	}
}

// findDocs runs Find with opts and returns the documents.
func findDocs(t *testing.T, coll *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []string {
	t.Helper()
	cur, err := coll.Find(ctx(t), filter, opts...)
	if err != nil {
		t.Fatalf("Find(%v): %v", filter, err)
	}
	return allRelaxed(t, cur)
}

func TestDriverFindOptions(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("people")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}, {Key: "age", Value: 31}, {Key: "team", Value: "b"}, {Key: "addr", Value: bson.D{{Key: "city", Value: "Oslo"}, {Key: "zip", Value: "0150"}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}, {Key: "age", Value: int64(25)}, {Key: "team", Value: "a"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "cy"}, {Key: "age", Value: 40.5}, {Key: "team", Value: "b"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "name", Value: "dee"}, {Key: "age", Value: 25}, {Key: "team", Value: "a"}},
		bson.D{{Key: "_id", Value: 5}, {Key: "name", Value: "eve"}, {Key: "team", Value: "c"}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}

	// Ages sort across int32, int64 and double; a missing age sorts first,
	// as null; ties keep their order.
	wantDocs(t, "sort by age, skip 1, limit 3, name only",
		findDocs(t, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "age", Value: 1}}).SetSkip(1).SetLimit(3).SetProjection(bson.D{{Key: "name", Value: 1}})),
		`{"_id":2,"name":"bob"}`, `{"_id":4,"name":"dee"}`, `{"_id":1,"name":"ann"}`)
	wantDocs(t, "sort by team then age descending, without _id",
		findDocs(t, coll, bson.D{{Key: "age", Value: bson.D{{Key: "$exists", Value: true}}}},
			options.Find().SetSort(bson.D{{Key: "team", Value: 1}, {Key: "age", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "name", Value: 1}, {Key: "addr.city", Value: 1}})),
		`{"name":"bob"}`, `{"name":"dee"}`, `{"name":"cy"}`, `{"name":"ann","addr":{"city":"Oslo"}}`)
	wantDocs(t, "exclusion",
		findDocs(t, coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: 1}}}}, options.Find().SetProjection(bson.D{{Key: "age", Value: 0}, {Key: "addr.zip", Value: 0}, {Key: "team", Value: false}})),
		`{"_id":1,"name":"ann","addr":{"city":"Oslo"}}`)
	wantDocs(t, "limit and batch size over several batches",
		findDocs(t, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetBatchSize(2).SetLimit(4).SetProjection(bson.D{{Key: "_id", Value: 1}})),
		`{"_id":5}`, `{"_id":4}`, `{"_id":3}`, `{"_id":2}`)

	var one bson.Raw
	if err := coll.FindOne(c, bson.D{{Key: "team", Value: "b"}}, options.FindOne().SetSort(bson.D{{Key: "age", Value: -1}}).SetProjection(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 0}})).Decode(&one); err != nil {
		t.Fatalf("FindOne: %v", err)
	}
	if got := relaxed(t, one); got != `{"name":"cy"}` {
		t.Errorf("FindOne sorted by age descending = %s", got)
	}
	if err := coll.FindOne(c, bson.D{{Key: "team", Value: "z"}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("FindOne of nothing: %v, want ErrNoDocuments", err)
	}
	_, err := coll.Find(c, bson.D{}, options.Find().SetProjection(bson.D{{Key: "name", Value: 1}, {Key: "age", Value: 0}}))
	wantCode(t, "a projection that mixes inclusion and exclusion", err, 31254, "Cannot do exclusion on field age in inclusion projection")
	_, err = coll.Find(c, bson.D{}, options.Find().SetSort(bson.D{{Key: "age", Value: 2}}))
	wantCode(t, "a sort that is neither 1 nor -1", err, 15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
}

func TestDriverQueryOperators(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("q")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 5}, {Key: "s", Value: "apple"}, {Key: "tags", Value: bson.A{"red", "green"}}, {Key: "items", Value: bson.A{bson.D{{Key: "k", Value: "a"}, {Key: "q", Value: 1}}, bson.D{{Key: "k", Value: "b"}, {Key: "q", Value: 7}}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 10.5}, {Key: "s", Value: "Banana"}, {Key: "tags", Value: bson.A{"yellow"}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: "5"}, {Key: "s", Value: "cherry"}, {Key: "tags", Value: bson.A{}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "v", Value: nil}, {Key: "items", Value: bson.A{bson.D{{Key: "k", Value: "b"}, {Key: "q", Value: 2}}}}},
		bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: bson.A{1, 20}}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	ids := func(filter bson.D) []int {
		t.Helper()
		cur, err := coll.Find(c, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatalf("Find(%v): %v", filter, err)
		}
		var out []int
		for cur.Next(c) {
			out = append(out, int(cur.Current.Lookup("_id").AsInt64()))
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	op := func(field, op string, v any) bson.D { return bson.D{{Key: field, Value: bson.D{{Key: op, Value: v}}}} }
	for _, tc := range []struct {
		name   string
		filter bson.D
		want   []int
	}{
		{"$gt compares numbers of any type, not strings", op("v", "$gt", 5), []int{2, 5}},
		{"$gte int64", op("v", "$gte", int64(5)), []int{1, 2, 5}},
		{"$lt on an array element", op("v", "$lt", 2), []int{5}},
		{"$lte string", op("v", "$lte", "5"), []int{3}},
		{"$eq number", op("v", "$eq", 5.0), []int{1}},
		{"$ne", op("v", "$ne", 5), []int{2, 3, 4, 5}},
		{"$in with null", op("v", "$in", bson.A{10.5, nil}), []int{2, 4}},
		{"$nin", op("s", "$nin", bson.A{"apple", "cherry"}), []int{2, 4, 5}},
		{"$exists false", op("s", "$exists", false), []int{4, 5}},
		{"$exists true", op("items", "$exists", true), []int{1, 4}},
		{"equality on an array element", bson.D{{Key: "tags", Value: "green"}}, []int{1}},
		{"equality on a whole array", bson.D{{Key: "tags", Value: bson.A{"yellow"}}}, []int{2}},
		{"empty array", bson.D{{Key: "tags", Value: bson.A{}}}, []int{3}},
		{"dotted path into an array of documents", bson.D{{Key: "items.k", Value: "b"}}, []int{1, 4}},
		{"dotted path with an index", bson.D{{Key: "items.0.k", Value: "a"}}, []int{1}},
		{"dotted path and $gt", op("items.q", "$gt", 5), []int{1}},
		// Each clause may match a different element of an array.
		{"$and", bson.D{{Key: "$and", Value: bson.A{op("v", "$gte", 5), op("v", "$lte", 10)}}}, []int{1, 5}},
		{"$or", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "s", Value: "apple"}}, op("v", "$gt", 15)}}}, []int{1, 5}},
		{"$nor", bson.D{{Key: "$nor", Value: bson.A{op("v", "$type", "number")}}}, []int{3, 4}},
		{"$not", op("v", "$not", bson.D{{Key: "$gt", Value: 5}}), []int{1, 3, 4}},
		{"$regex", op("s", "$regex", "^[ab]"), []int{1}},
		{"$regex with options", bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "A"}, {Key: "$options", Value: "i"}}}}, []int{1, 2}},
		{"a regular expression value", bson.D{{Key: "s", Value: bson.Regex{Pattern: "rr", Options: ""}}}, []int{3}},
		{"$not with a regular expression", bson.D{{Key: "s", Value: bson.D{{Key: "$not", Value: bson.Regex{Pattern: "an"}}}}}, []int{1, 3, 4, 5}},
		{"$elemMatch", op("items", "$elemMatch", bson.D{{Key: "k", Value: "b"}, {Key: "q", Value: bson.D{{Key: "$lt", Value: 5}}}}), []int{4}},
		{"$size", op("tags", "$size", 1), []int{2}},
		{"$all", op("tags", "$all", bson.A{"green", "red"}), []int{1}},
	} {
		if got := ids(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v matches %v, want %v", tc.name, tc.filter, got, tc.want)
		}
	}
}

func TestDriverCount(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	c := ctx(t)
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "i", Value: i}, {Key: "even", Value: i%2 == 0}})
	}
	if _, err := coll.InsertMany(c, docs); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	before := srv.Stats().Commands["aggregate"]
	for _, tc := range []struct {
		filter bson.D
		opts   *options.CountOptionsBuilder
		want   int64
	}{
		{bson.D{}, options.Count(), 20},
		{bson.D{{Key: "even", Value: true}}, options.Count(), 10},
		{bson.D{{Key: "i", Value: bson.D{{Key: "$gte", Value: 15}}}}, options.Count(), 5},
		{bson.D{{Key: "even", Value: true}}, options.Count().SetSkip(3).SetLimit(5), 5},
		{bson.D{{Key: "even", Value: true}}, options.Count().SetSkip(8), 2},
		{bson.D{{Key: "none", Value: 1}}, options.Count(), 0},
	} {
		n, err := coll.CountDocuments(c, tc.filter, tc.opts)
		if err != nil || n != tc.want {
			t.Errorf("CountDocuments(%v) = %d, %v; want %d", tc.filter, n, err, tc.want)
		}
	}
	if n := srv.Stats().Commands["aggregate"] - before; n != 6 {
		t.Errorf("%d aggregate commands for 6 CountDocuments, want 6", n)
	}
	if n, err := coll.EstimatedDocumentCount(c); err != nil || n != 20 {
		t.Errorf("EstimatedDocumentCount = %d, %v; want 20", n, err)
	}
}

func TestDriverDistinct(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "k", Value: "b"}, {Key: "n", Value: 2}, {Key: "a", Value: bson.D{{Key: "t", Value: bson.A{"x", "y"}}}}},
		bson.D{{Key: "k", Value: "a"}, {Key: "n", Value: 2.0}, {Key: "a", Value: bson.D{{Key: "t", Value: "z"}}}},
		bson.D{{Key: "k", Value: "b"}, {Key: "n", Value: int64(1)}},
		bson.D{{Key: "k", Value: "c"}, {Key: "n", Value: "1"}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	var keys []string
	if err := coll.Distinct(c, "k", bson.D{}).Decode(&keys); err != nil {
		t.Fatalf("Distinct k: %v", err)
	}
	if !slices.Equal(keys, []string{"a", "b", "c"}) {
		t.Errorf("Distinct k = %v, want [a b c]", keys)
	}
	raw, err := coll.Distinct(c, "n", bson.D{}).Raw()
	if err != nil {
		t.Fatalf("Distinct n: %v", err)
	}
	// 2 and 2.0 are one value, the first seen; numbers sort before strings.
	if got := relaxedArray(t, raw); got != `[1,2,"1"]` {
		t.Errorf("Distinct n = %s, want [1,2,\"1\"]", got)
	}
	var ts []string
	if err := coll.Distinct(c, "a.t", bson.D{}).Decode(&ts); err != nil {
		t.Fatalf("Distinct a.t: %v", err)
	}
	if !slices.Equal(ts, []string{"x", "y", "z"}) {
		t.Errorf("Distinct a.t = %v, want the array's elements and z: [x y z]", ts)
	}
}

// relaxedArray returns arr as relaxed extended JSON.
func relaxedArray(t *testing.T, arr bson.RawArray) string {
	t.Helper()
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, v := range vals {
		doc := relaxed(t, marshal(t, bson.D{{Key: "v", Value: v}}))
		parts = append(parts, strings.TrimSuffix(strings.TrimPrefix(doc, `{"v":`), "}"))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestDriverFindOneAnd(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "q", Value: 3}, {Key: "g", Value: "a"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "q", Value: 1}, {Key: "g", Value: "a"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "q", Value: 2}, {Key: "g", Value: "b"}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	decode := func(what string, r *mongo.SingleResult) string {
		t.Helper()
		raw, err := r.Raw()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return relaxed(t, raw)
	}
	wantOne := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %s, want %s", what, got, want)
		}
	}
	// By default the document before the update; sort picks which.
	wantOne("FindOneAndUpdate", decode("FindOneAndUpdate", coll.FindOneAndUpdate(c, bson.D{{Key: "g", Value: "a"}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "q", Value: 10}}}}, options.FindOneAndUpdate().SetSort(bson.D{{Key: "q", Value: 1}}))),
		`{"_id":2,"q":1,"g":"a"}`)
	wantOne("FindOneAndUpdate after, projected", decode("FindOneAndUpdate after", coll.FindOneAndUpdate(c, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "g", Value: "c"}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(bson.D{{Key: "g", Value: 1}}))),
		`{"_id":1,"g":"c"}`)
	wantOne("FindOneAndUpdate upsert", decode("FindOneAndUpdate upsert", coll.FindOneAndUpdate(c, bson.D{{Key: "_id", Value: 7}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: 70}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After))),
		`{"_id":7,"q":70}`)
	if err := coll.FindOneAndUpdate(c, bson.D{{Key: "_id", Value: 8}}, bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: 1}}}},
		options.FindOneAndUpdate().SetUpsert(true)).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("FindOneAndUpdate upsert returning the document before: %v, want ErrNoDocuments", err)
	}
	wantOne("FindOneAndReplace", decode("FindOneAndReplace", coll.FindOneAndReplace(c, bson.D{{Key: "g", Value: "b"}},
		bson.D{{Key: "r", Value: true}}, options.FindOneAndReplace().SetReturnDocument(options.After))),
		`{"_id":3,"r":true}`)
	wantOne("FindOneAndDelete", decode("FindOneAndDelete", coll.FindOneAndDelete(c, bson.D{},
		options.FindOneAndDelete().SetSort(bson.D{{Key: "q", Value: -1}}))),
		`{"_id":7,"q":70}`)
	if err := coll.FindOneAndDelete(c, bson.D{{Key: "_id", Value: 100}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("FindOneAndDelete of nothing: %v, want ErrNoDocuments", err)
	}
	wantDocs(t, "left", collDocs(t, coll),
		`{"_id":1,"q":3,"g":"c"}`, `{"_id":2,"q":11,"g":"a"}`, `{"_id":3,"r":true}`, `{"_id":8,"q":1}`)
}

func TestDriverAggregate(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("sales")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "pen"}, {Key: "qty", Value: 5}, {Key: "price", Value: 1.5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "ink"}, {Key: "qty", Value: 2}, {Key: "price", Value: 4.0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "item", Value: "pen"}, {Key: "qty", Value: int64(10)}, {Key: "price", Value: 1.5}},
		bson.D{{Key: "_id", Value: 4}, {Key: "item", Value: "pad"}, {Key: "qty", Value: 1}},
		bson.D{{Key: "_id", Value: 5}, {Key: "item", Value: "ink"}, {Key: "qty", Value: 3}, {Key: "price", Value: 4.0}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	agg := func(pipeline ...bson.D) []string {
		t.Helper()
		cur, err := coll.Aggregate(c, pipeline)
		if err != nil {
			t.Fatalf("Aggregate(%v): %v", pipeline, err)
		}
		return allRelaxed(t, cur)
	}
	wantDocs(t, "$match $group $sort $project",
		agg(
			bson.D{{Key: "$match", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}}}},
			bson.D{{Key: "$group", Value: bson.D{
				{Key: "_id", Value: "$item"},
				{Key: "total", Value: bson.D{{Key: "$sum", Value: "$qty"}}},
				{Key: "orders", Value: bson.D{{Key: "$sum", Value: 1}}},
			}}},
			bson.D{{Key: "$sort", Value: bson.D{{Key: "total", Value: -1}}}},
			bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "item", Value: "$_id"}, {Key: "total", Value: 1}, {Key: "orders", Value: 1}}}},
		),
		`{"total":15,"orders":2,"item":"pen"}`, `{"total":5,"orders":2,"item":"ink"}`)
	wantDocs(t, "$count", agg(
		bson.D{{Key: "$match", Value: bson.D{{Key: "price", Value: bson.D{{Key: "$exists", Value: true}}}}}},
		bson.D{{Key: "$count", Value: "priced"}},
	), `{"priced":4}`)
	wantDocs(t, "$sort $skip $limit and an exclusion $project", agg(
		bson.D{{Key: "$sort", Value: bson.D{{Key: "qty", Value: 1}}}},
		bson.D{{Key: "$skip", Value: 1}},
		bson.D{{Key: "$limit", Value: 2}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "price", Value: 0}, {Key: "item", Value: 0}}}},
	), `{"_id":2,"qty":2}`, `{"_id":5,"qty":3}`)
	wantDocs(t, "$group by null", agg(
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$price"}}}}}},
	), `{"_id":null,"n":11.0}`)
	if got := agg(bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: "none"}}}}, bson.D{{Key: "$count", Value: "n"}}); len(got) != 0 {
		t.Errorf("$count of nothing = %v, want no document", got)
	}
}

func TestDriverUniqueIndex(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("users")
	c := ctx(t)
	if _, err := coll.InsertOne(c, bson.D{{Key: "email", Value: "a@x"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	name, err := coll.Indexes().CreateOne(c, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)})
	if err != nil || name != "email_1" {
		t.Fatalf("CreateOne = %q, %v; want email_1", name, err)
	}
	_, err = coll.InsertOne(c, bson.D{{Key: "email", Value: "a@x"}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("a duplicate email: %v, want a duplicate key error", err)
	}
	wantCode(t, "the duplicate insert", err, 11000, `E11000 duplicate key error collection: x.users index: email_1 dup key: { email: "a@x" }`)
	if _, err := coll.InsertOne(c, bson.D{{Key: "email", Value: "b@x"}, {Key: "n", Value: 2}}); err != nil {
		t.Fatalf("a second email: %v", err)
	}
	_, err = coll.UpdateOne(c, bson.D{{Key: "n", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a@x"}}}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Errorf("an update to a duplicate email: %v, want a duplicate key error", err)
	}
	specs, err := coll.Indexes().ListSpecifications(c)
	if err != nil {
		t.Fatalf("ListSpecifications: %v", err)
	}
	if len(specs) != 2 || specs[0].Name != "_id_" || specs[1].Name != "email_1" || specs[1].Unique == nil || !*specs[1].Unique ||
		relaxed(t, specs[1].KeysDocument) != `{"email":1}` {
		t.Errorf("ListSpecifications = %+v", specs)
	}
	// An index that the documents already break cannot be built.
	if _, err := coll.InsertOne(c, bson.D{{Key: "n", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	_, err = coll.Indexes().CreateOne(c, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: -1}}, Options: options.Index().SetUnique(true)})
	wantCode(t, "a unique index over duplicates", err, 11000, "E11000 duplicate key error collection: x.users index: n_-1 dup key: { n: 2 }")
	if err := coll.Indexes().DropOne(c, "email_1"); err != nil {
		t.Fatalf("DropOne: %v", err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "email", Value: "a@x"}}); err != nil {
		t.Errorf("a duplicate email after the index is dropped: %v", err)
	}
	err = coll.Indexes().DropOne(c, "email_1")
	wantCode(t, "dropping an index twice", err, 27, "index not found with name [email_1]")
}

func TestDriverTransactionOnStandalone(t *testing.T) {
	srv := start(t)
	client := connect(t, srv.URI())
	coll := client.Database("x").Collection("c")
	c := ctx(t)
	sess, err := client.StartSession()
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	defer sess.EndSession(c)
	_, err = sess.WithTransaction(c, func(sc context.Context) (any, error) {
		return coll.InsertOne(sc, bson.D{{Key: "a", Value: 1}})
	})
	wantCode(t, "a transaction on a standalone", err, 20, "Transaction numbers are only allowed on a replica set member or mongos")
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Name != "IllegalOperation" || len(ce.Labels) != 0) {
		t.Errorf("the error %+v: want codeName IllegalOperation and no labels", ce)
	}
	if n, err := coll.CountDocuments(c, bson.D{}); err != nil || n != 0 {
		t.Errorf("after the failed transaction: %d documents, %v; want none", n, err)
	}
}

func TestDriverRefusals(t *testing.T) {
	srv := start(t)
	client := connect(t, srv.URI())
	coll := client.Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertOne(c, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.Aggregate(c, bson.A{bson.D{{Key: "$frobnicate", Value: bson.D{}}}})
	wantCode(t, "an unknown stage", err, 40324, "Unrecognized pipeline stage name: '$frobnicate'")
	_, err = coll.Find(c, bson.D{{Key: "a", Value: bson.D{{Key: "$frob", Value: 1}}}})
	wantCode(t, "an unknown operator", err, 2, "unknown operator: $frob")
	_, err = coll.Find(c, bson.D{{Key: "$frob", Value: 1}})
	wantCode(t, "an unknown top-level operator", err, 2, "unknown top level operator: $frob")
	err = client.Database("x").RunCommand(c, bson.D{{Key: "frobnicate", Value: 1}}).Err()
	wantCode(t, "an unknown command", err, 59, "no such command: 'frobnicate'")
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Name != "CommandNotFound" {
		t.Errorf("codeName %q, want CommandNotFound", ce.Name)
	}
}

func TestDriverServerStatus(t *testing.T) {
	srv := start(t)
	client := connect(t, srv.URI())
	var status struct {
		Process     string `bson:"process"`
		Connections struct {
			Current      int64 `bson:"current"`
			Available    int64 `bson:"available"`
			TotalCreated int64 `bson:"totalCreated"`
		} `bson:"connections"`
	}
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "serverStatus", Value: 1}}).Decode(&status); err != nil {
		t.Fatalf("serverStatus: %v", err)
	}
	if status.Process != "mongod" || status.Connections.Current < 1 || status.Connections.Available <= 0 ||
		status.Connections.TotalCreated < status.Connections.Current {
		t.Errorf("serverStatus through the driver = %+v", status)
	}

	// Exact counts, on a server that only raw connections use.
	srv = start(t)
	r := dialRaw(t, srv)
	// A reply on each connection shows that the server has accepted it.
	checkOK(t, dialRaw(t, srv).run(pingCmd))
	reply := r.run(cmd("admin", bson.E{Key: "serverStatus", Value: 1}))
	checkOK(t, reply)
	conns, ok := reply.Lookup("connections").DocumentOK()
	if !ok {
		t.Fatalf("serverStatus %s has no connections section", reply)
	}
	current, _ := conns.Lookup("current").AsInt64OK()
	available, _ := conns.Lookup("available").AsInt64OK()
	total, _ := conns.Lookup("totalCreated").AsInt64OK()
	if current != 2 || total != 2 || available != 1000000-2 {
		t.Errorf("connections %s; want current 2, totalCreated 2, available 999998", conns)
	}
}
