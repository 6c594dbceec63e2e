package mongotest_test

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The tests below check details of MongoDB's semantics over a raw
// connection: the result of each update operator (with the BSON types it
// produces), sorts of arrays and mixed types, projections of arrays, and
// the aggregation stages beyond the basic ones.

// canonical returns doc as canonical extended JSON, where the numeric types
// show: {"$numberInt":"1"}.
func canonical(t *testing.T, doc bson.Raw) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docWith inserts doc into a fresh collection x.<name>, applies the update
// u to it, and returns the document after it as relaxed extended JSON, or
// the write error's "code: errmsg".
func docWith(t *testing.T, r *rawConn, name string, doc, u any) string {
	t.Helper()
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: name}, bson.E{Key: "documents", Value: bson.A{doc}})))
	reply := r.run(cmd("x", bson.E{Key: "update", Value: name}, bson.E{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: u}}}}))
	checkOK(t, reply)
	if we, err := reply.LookupErr("writeErrors", "0"); err == nil {
		return fmt.Sprintf("%d: %s", we.Document().Lookup("code").AsInt64(), we.Document().Lookup("errmsg").StringValue())
	}
	found := r.run(cmd("x", bson.E{Key: "find", Value: name}))
	checkOK(t, found)
	return relaxed(t, found.Lookup("cursor", "firstBatch", "0").Document())
}

func TestUpdateOperators(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	type D = bson.D
	type A = bson.A
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	for i, tc := range []struct {
		name string
		doc  D
		u    any
		want string
	}{
		{"$set creates documents on the way", D{e("_id", 1)}, D{e("$set", D{e("a.b.c", 1)})}, `{"_id":1,"a":{"b":{"c":1}}}`},
		{"$set pads an array", D{e("_id", 1), e("a", A{1})}, D{e("$set", D{e("a.3", "x")})}, `{"_id":1,"a":[1,null,null,"x"]}`},
		{"$set in an array element", D{e("_id", 1), e("a", A{D{e("b", 1)}})}, D{e("$set", D{e("a.0.b", 2)})}, `{"_id":1,"a":[{"b":2}]}`},
		{"$set through an array by name", D{e("_id", 1), e("a", A{1})}, D{e("$set", D{e("a.b", 2)})}, "28: Cannot create field 'b' in element {a: [ 1 ]}"},
		{"$set past the padding limit", D{e("_id", 1), e("a", A{})}, D{e("$set", D{e("a.1500001", 2)})}, "2: can't backfill more than 1500000 elements"},
		{"new fields in the order of their names", D{e("_id", 1), e("m", 1)}, D{e("$set", D{e("z", 1), e("b", 1)}), e("$inc", D{e("a", 1)})}, `{"_id":1,"m":1,"a":1,"b":1,"z":1}`},
		{"$unset, and in an array", D{e("_id", 1), e("a", 1), e("b", A{1, 2})}, D{e("$unset", D{e("a", ""), e("b.0", ""), e("c", "")})}, `{"_id":1,"b":[null,2]}`},
		{"$inc on a missing field", D{e("_id", 1)}, D{e("$inc", D{e("n", int64(5))})}, `{"_id":1,"n":5}`},
		{"$mul on a missing field", D{e("_id", 1)}, D{e("$mul", D{e("n", 3.5)})}, `{"_id":1,"n":0.0}`},
		{"$mul", D{e("_id", 1), e("n", 4)}, D{e("$mul", D{e("n", 2.5)})}, `{"_id":1,"n":10.0}`},
		{"$inc overflows int64", D{e("_id", 1), e("n", int64(1<<62))}, D{e("$inc", D{e("n", int64(1<<62))})}, "2: Failed to apply $inc operations to current value (4611686018427387904) for document {_id: 1}"},
		{"$min and $max", D{e("_id", 1), e("lo", 5), e("hi", 5)}, D{e("$min", D{e("lo", 3), e("x", 1)}), e("$max", D{e("hi", 4)})}, `{"_id":1,"lo":3,"hi":5,"x":1}`},
		{"$min across types", D{e("_id", 1), e("v", "a")}, D{e("$min", D{e("v", 100)})}, `{"_id":1,"v":100}`},
		{"$rename", D{e("_id", 1), e("a", 1), e("b", D{e("c", 2)})}, D{e("$rename", D{e("a", "z"), e("b.c", "d")})}, `{"_id":1,"b":{},"d":2,"z":1}`},
		{"$push with modifiers", D{e("_id", 1), e("a", A{5, 1})}, D{e("$push", D{e("a", D{e("$each", A{3, 9}), e("$sort", -1), e("$slice", 3)})})}, `{"_id":1,"a":[9,5,3]}`},
		{"$push at a position", D{e("_id", 1), e("a", A{1, 2})}, D{e("$push", D{e("a", D{e("$each", A{"x"}), e("$position", 1)})})}, `{"_id":1,"a":[1,"x",2]}`},
		{"$push sorts documents by a field", D{e("_id", 1), e("a", A{D{e("s", 2)}})}, D{e("$push", D{e("a", D{e("$each", A{D{e("s", 1)}}), e("$sort", D{e("s", 1)})})})}, `{"_id":1,"a":[{"s":1},{"s":2}]}`},
		{"$push on a non-array", D{e("_id", 1), e("a", "s")}, D{e("$push", D{e("a", 1)})}, "2: The field 'a' must be an array but is of type string in document {_id: 1}"},
		{"$addToSet", D{e("_id", 1), e("a", A{1, "x"})}, D{e("$addToSet", D{e("a", D{e("$each", A{1.0, "y", "y"})})})}, `{"_id":1,"a":[1,"x","y"]}`},
		{"$pop", D{e("_id", 1), e("a", A{1, 2, 3}), e("b", A{1, 2, 3})}, D{e("$pop", D{e("a", 1), e("b", -1)})}, `{"_id":1,"a":[1,2],"b":[2,3]}`},
		{"$pull with a condition", D{e("_id", 1), e("a", A{1, 5, 2, 7})}, D{e("$pull", D{e("a", D{e("$gte", 5)})})}, `{"_id":1,"a":[1,2]}`},
		{"$pull with a filter", D{e("_id", 1), e("a", A{D{e("k", 1), e("v", "x")}, D{e("k", 2)}})}, D{e("$pull", D{e("a", D{e("k", 1)})})}, `{"_id":1,"a":[{"k":2}]}`},
		{"$pullAll", D{e("_id", 1), e("a", A{1, 2, 1, 3})}, D{e("$pullAll", D{e("a", A{1, 3.0})})}, `{"_id":1,"a":[2]}`},
		{"an insert puts _id first", D{e("a", 1), e("_id", 1)}, D{e("$set", D{e("b", 1)})}, `{"_id":1,"a":1,"b":1}`},
		{"a replacement puts _id first", D{e("_id", 1)}, D{e("b", 2), e("_id", 1)}, `{"_id":1,"b":2}`},
		{"a replacement keeps _id first", D{e("_id", 1), e("a", 1)}, D{e("b", 2), e("c", 3)}, `{"_id":1,"b":2,"c":3}`},
		{"a replacement cannot change _id", D{e("_id", 1)}, D{e("_id", 2)}, "66: The _id field cannot be changed from {_id: 1} to {_id: 2}."},
		{"a $-prefixed field in a replacement", D{e("_id", 1)}, D{e("a", 1), e("$set", D{})}, "52: The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."},
		{"the positional operator without a match from the query", D{e("_id", 1), e("a", A{1})}, D{e("$set", D{e("a.$", 2)})}, "2: The positional operator did not find the match needed from the query."},
		{"a pipeline update", D{e("_id", 1)}, A{D{e("$set", D{e("a", 1)})}}, "2: mongotest does not implement pipeline-style updates"},
		{"$bit", D{e("_id", 1), e("a", 1)}, D{e("$bit", D{e("a", D{e("and", 1)})})}, "2: mongotest does not implement the update operator $bit"},
		{"a path and a field within it", D{e("_id", 1)}, D{e("$set", D{e("a", 1), e("a.b", 1)})}, "40: Updating the path 'a.b' would create a conflict at 'a'"},
	} {
		if got := docWith(t, r, fmt.Sprintf("u%d", i), tc.doc, tc.u); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}

	// The numeric types an update produces.
	for i, tc := range []struct {
		doc  bson.D
		u    bson.D
		want string
	}{
		{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int32(1)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(2)}}}}, `{"_id":{"$numberInt":"1"},"n":{"$numberInt":"3"}}`},
		{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int32(2147483647)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}, `{"_id":{"$numberInt":"1"},"n":{"$numberLong":"2147483648"}}`},
		{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int32(1)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}}, `{"_id":{"$numberInt":"1"},"n":{"$numberLong":"2"}}`},
		{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: int64(1)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 0.5}}}}, `{"_id":{"$numberInt":"1"},"n":{"$numberDouble":"1.5"}}`},
	} {
		name := fmt.Sprintf("t%d", i)
		checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: name}, bson.E{Key: "documents", Value: bson.A{tc.doc}})))
		checkOK(t, r.run(cmd("x", bson.E{Key: "update", Value: name}, bson.E{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: tc.u}}}})))
		found := r.run(cmd("x", bson.E{Key: "find", Value: name}))
		if got := canonical(t, found.Lookup("cursor", "firstBatch", "0").Document()); got != tc.want {
			t.Errorf("%v then %v = %s, want %s", tc.doc, tc.u, got, tc.want)
		}
	}
}

// findIDs runs find on x.<coll> with the fields and returns the _id of each
// document, in order.
func findIDs(t *testing.T, r *rawConn, coll string, fields ...bson.E) string {
	t.Helper()
	reply := r.run(cmd("x", append([]bson.E{{Key: "find", Value: coll}}, fields...)...))
	checkOK(t, reply)
	var ids []string
	for _, v := range arrayValues(t, reply.Lookup("cursor", "firstBatch")) {
		ids = append(ids, fmt.Sprint(v.Document().Lookup("_id").AsInt64()))
	}
	return strings.Join(ids, " ")
}

// arrayValues returns the elements of the array v.
func arrayValues(t *testing.T, v bson.RawValue) []bson.RawValue {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("%s is not an array", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestSortOrder(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	docs := bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: bson.A{3, 1}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: bson.A{}}},
		bson.D{{Key: "_id", Value: 4}},
		bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: "a"}},
		bson.D{{Key: "_id", Value: 6}, {Key: "v", Value: bson.D{{Key: "x", Value: 1}}}},
		bson.D{{Key: "_id", Value: 7}, {Key: "v", Value: true}},
		bson.D{{Key: "_id", Value: 8}, {Key: "v", Value: bson.NewObjectIDFromTimestamp(bson.DateTime(0).Time())}},
		bson.D{{Key: "_id", Value: 9}, {Key: "v", Value: bson.DateTime(0)}},
		bson.D{{Key: "_id", Value: 10}, {Key: "v", Value: bson.MinKey{}}},
		bson.D{{Key: "_id", Value: 11}, {Key: "v", Value: bson.MaxKey{}}},
		bson.D{{Key: "_id", Value: 12}, {Key: "v", Value: nil}},
		bson.D{{Key: "_id", Value: 13}, {Key: "v", Value: 1.5}},
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "s"}, bson.E{Key: "documents", Value: docs})))
	// MinKey, the empty array, null and missing (in insertion order), the
	// numbers (an array by its least element), strings, documents, ObjectId,
	// booleans, dates, MaxKey.
	if got := findIDs(t, r, "s", bson.E{Key: "sort", Value: bson.D{{Key: "v", Value: 1}}}); got != "10 3 4 12 1 13 2 5 6 8 7 9 11" {
		t.Errorf("ascending: %s", got)
	}
	// Descending, an array sorts by its greatest element.
	if got := findIDs(t, r, "s", bson.E{Key: "sort", Value: bson.D{{Key: "v", Value: -1}}}); got != "11 9 7 8 6 5 1 2 13 4 12 3 10" {
		t.Errorf("descending: %s", got)
	}
	if got := findIDs(t, r, "s", bson.E{Key: "sort", Value: bson.D{{Key: "$natural", Value: -1}}}, bson.E{Key: "limit", Value: 3}); got != "13 12 11" {
		t.Errorf("$natural descending: %s", got)
	}
}

func TestProjectionOfArrays(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	doc := bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{bson.D{{Key: "b", Value: 1}, {Key: "c", Value: 2}}, 7, bson.A{bson.D{{Key: "b", Value: 3}}}}}, {Key: "d", Value: 4}}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "p"}, bson.E{Key: "documents", Value: bson.A{doc}})))
	for _, tc := range []struct {
		proj bson.D
		want string
	}{
		{bson.D{{Key: "a.b", Value: 1}}, `{"_id":1,"a":[{"b":1},[{"b":3}]]}`},
		{bson.D{{Key: "a.b", Value: 0}, {Key: "_id", Value: 0}}, `{"a":[{"c":2},7,[{}]],"d":4}`},
		{bson.D{{Key: "a", Value: bson.D{{Key: "c", Value: true}}}, {Key: "_id", Value: false}}, `{"a":[{"c":2},[{}]]}`},
		{bson.D{{Key: "x", Value: "$d"}, {Key: "y", Value: bson.D{{Key: "$literal", Value: "$d"}}}, {Key: "z", Value: "lit"}}, `{"_id":1,"x":4,"y":"$d","z":"lit"}`},
		{bson.D{{Key: "_id", Value: 1}}, `{"_id":1}`},
		{bson.D{{Key: "_id", Value: 0}}, `{"a":[{"b":1,"c":2},7,[{"b":3}]],"d":4}`},
	} {
		reply := r.run(cmd("x", bson.E{Key: "find", Value: "p"}, bson.E{Key: "projection", Value: tc.proj}))
		checkOK(t, reply)
		if got := relaxed(t, reply.Lookup("cursor", "firstBatch", "0").Document()); got != tc.want {
			t.Errorf("projection %v = %s, want %s", tc.proj, got, tc.want)
		}
	}
	for _, tc := range []struct {
		proj bson.D
		code int32
		msg  string
	}{
		{bson.D{{Key: "a", Value: 0}, {Key: "d", Value: 1}}, 31253, "Cannot do inclusion on field d in exclusion projection"},
		{bson.D{{Key: "a", Value: 1}, {Key: "a.b", Value: 1}}, 31250, "Path collision at a.b"},
		{bson.D{{Key: "a", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}, 2, "mongotest does not implement the projection operator $meta (on a)"},
		{bson.D{{Key: "a.$", Value: 1}}, 51246, "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array"},
	} {
		reply := r.run(cmd("x", bson.E{Key: "find", Value: "p"}, bson.E{Key: "projection", Value: tc.proj}))
		if msg := checkError(t, reply, tc.code, codeNameFor(tc.code)); msg != tc.msg {
			t.Errorf("projection %v: errmsg %q, want %q", tc.proj, msg, tc.msg)
		}
	}
}

// codeNameFor is mongod's codeName of the codes the tests expect.
func codeNameFor(code int32) string {
	if name, ok := map[int32]string{2: "BadValue", 9: "FailedToParse", 14: "TypeMismatch"}[code]; ok {
		return name
	}
	return fmt.Sprintf("Location%d", code)
}

// aggregate runs a pipeline on x.<coll> and returns the documents as
// relaxed extended JSON.
func aggregate(t *testing.T, r *rawConn, coll string, stages ...bson.D) []string {
	t.Helper()
	pipeline := bson.A{}
	for _, s := range stages {
		pipeline = append(pipeline, s)
	}
	reply := r.run(cmd("x", bson.E{Key: "aggregate", Value: coll}, bson.E{Key: "pipeline", Value: pipeline}, bson.E{Key: "cursor", Value: bson.D{}}))
	checkOK(t, reply)
	var out []string
	for _, v := range arrayValues(t, reply.Lookup("cursor", "firstBatch")) {
		out = append(out, relaxed(t, v.Document()))
	}
	return out
}

func TestAggregateStages(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	docs := bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: "a"}, {Key: "v", Value: 3}, {Key: "tags", Value: bson.A{"x", "y"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: "b"}, {Key: "v", Value: int64(5)}, {Key: "tags", Value: bson.A{}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "g", Value: "a"}, {Key: "v", Value: 4.5}},
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "g"}, bson.E{Key: "documents", Value: docs})))
	group := bson.D{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: bson.D{{Key: "group", Value: "$g"}}},
		{Key: "n", Value: bson.D{{Key: "$count", Value: bson.D{}}}},
		{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$v"}}},
		{Key: "min", Value: bson.D{{Key: "$min", Value: "$v"}}},
		{Key: "max", Value: bson.D{{Key: "$max", Value: "$v"}}},
		{Key: "first", Value: bson.D{{Key: "$first", Value: "$_id"}}},
		{Key: "last", Value: bson.D{{Key: "$last", Value: "$_id"}}},
		{Key: "ids", Value: bson.D{{Key: "$push", Value: "$_id"}}},
		{Key: "tags", Value: bson.D{{Key: "$addToSet", Value: "$tags"}}},
	}}}
	wantDocs(t, "$group with each accumulator", aggregate(t, r, "g", group),
		`{"_id":{"group":"a"},"n":2,"avg":3.75,"min":3,"max":4.5,"first":1,"last":3,"ids":[1,3],"tags":[["x","y"]]}`,
		`{"_id":{"group":"b"},"n":1,"avg":5.0,"min":5,"max":5,"first":2,"last":2,"ids":[2],"tags":[[]]}`)
	wantDocs(t, "$unwind", aggregate(t, r, "g", bson.D{{Key: "$unwind", Value: "$tags"}}, bson.D{{Key: "$project", Value: bson.D{{Key: "tags", Value: 1}}}}),
		`{"_id":1,"tags":"x"}`, `{"_id":1,"tags":"y"}`)
	wantDocs(t, "$unwind preserving, with the index", aggregate(t, r, "g",
		bson.D{{Key: "$unwind", Value: bson.D{{Key: "path", Value: "$tags"}, {Key: "includeArrayIndex", Value: "i"}, {Key: "preserveNullAndEmptyArrays", Value: true}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "tags", Value: 1}, {Key: "i", Value: 1}}}}),
		`{"_id":1,"tags":"x","i":0}`, `{"_id":1,"tags":"y","i":1}`, `{"_id":2,"i":null}`, `{"_id":3,"i":null}`)
	wantDocs(t, "$addFields, $unset, $replaceWith", aggregate(t, r, "g",
		bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 1}}}},
		bson.D{{Key: "$addFields", Value: bson.D{{Key: "w", Value: "$v"}, {Key: "sub", Value: bson.D{{Key: "k", Value: "$g"}}}}}},
		bson.D{{Key: "$unset", Value: bson.A{"tags", "v"}}},
		bson.D{{Key: "$replaceWith", Value: bson.D{{Key: "all", Value: "$$ROOT"}}}}),
		`{"all":{"_id":1,"g":"a","w":3,"sub":{"k":"a"}}}`)
	wantDocs(t, "$sort and $limit of $group", aggregate(t, r, "g",
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "s", Value: 1}}}},
		bson.D{{Key: "$limit", Value: 1}}),
		`{"_id":"b","s":5}`)
	for _, tc := range []struct {
		stage bson.D
		code  int32
		msg   string
	}{
		{bson.D{{Key: "$limit", Value: 0}}, 15958, "the limit must be positive"},
		{bson.D{{Key: "$skip", Value: -1}}, 5107200, "invalid argument to $skip stage: Expected a non-negative number in: $skip: -1"},
		{bson.D{{Key: "$count", Value: "a.b"}}, 40160, "the count field cannot contain '.'"},
		{bson.D{{Key: "$group", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}, 15955, "a group specification must include an _id"},
		{bson.D{{Key: "$sort", Value: bson.D{}}}, 15976, "$sort stage must have at least one sort key"},
		{bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: "$$nope"}}}}, 17276, "Use of undefined variable: nope"},
	} {
		reply := r.run(cmd("x", bson.E{Key: "aggregate", Value: "g"}, bson.E{Key: "pipeline", Value: bson.A{tc.stage}}, bson.E{Key: "cursor", Value: bson.D{}}))
		if msg := checkError(t, reply, tc.code, codeNameFor(tc.code)); msg != tc.msg {
			t.Errorf("%v: errmsg %q, want %q", tc.stage, msg, tc.msg)
		}
	}

	// An aggregate's cursor goes on with getMore.
	reply := r.run(cmd("x", bson.E{Key: "aggregate", Value: "g"}, bson.E{Key: "pipeline", Value: bson.A{}}, bson.E{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 2}}}))
	checkOK(t, reply)
	id := reply.Lookup("cursor", "id").Int64()
	if n := len(arrayValues(t, reply.Lookup("cursor", "firstBatch"))); n != 2 || id == 0 {
		t.Fatalf("aggregate with batchSize 2: %s", reply)
	}
	reply = r.run(cmd("x", bson.E{Key: "getMore", Value: id}, bson.E{Key: "collection", Value: "g"}))
	checkOK(t, reply)
	if n := len(arrayValues(t, reply.Lookup("cursor", "nextBatch"))); n != 1 || reply.Lookup("cursor", "id").Int64() != 0 {
		t.Errorf("getMore of the aggregate: %s", reply)
	}
}

func TestIndexRules(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	create := func(specs ...bson.D) bson.Raw {
		t.Helper()
		a := bson.A{}
		for _, s := range specs {
			a = append(a, s)
		}
		return r.run(cmd("x", bson.E{Key: "createIndexes", Value: "i"}, bson.E{Key: "indexes", Value: a}))
	}
	insert := func(docs ...bson.D) bson.Raw {
		t.Helper()
		a := bson.A{}
		for _, d := range docs {
			a = append(a, d)
		}
		return r.run(cmd("x", bson.E{Key: "insert", Value: "i"}, bson.E{Key: "documents", Value: a}, bson.E{Key: "ordered", Value: false}))
	}
	dupCodes := func(reply bson.Raw) []int64 {
		t.Helper()
		checkOK(t, reply)
		var codes []int64
		if v, err := reply.LookupErr("writeErrors"); err == nil {
			for _, we := range arrayValues(t, v) {
				codes = append(codes, we.Document().Lookup("index").AsInt64())
			}
		}
		return codes
	}
	reply := create(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}}, {Key: "name", Value: "ab"}, {Key: "unique", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "s", Value: 1}}}, {Key: "name", Value: "s"}, {Key: "unique", Value: true}, {Key: "sparse", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "tags", Value: 1}}}, {Key: "name", Value: "tags"}, {Key: "unique", Value: true}})
	checkOK(t, reply)
	if b, a := reply.Lookup("numIndexesBefore").AsInt64(), reply.Lookup("numIndexesAfter").AsInt64(); b != 1 || a != 4 || !reply.Lookup("createdCollectionAutomatically").Boolean() {
		t.Errorf("createIndexes: %s", reply)
	}
	// Compound keys, with numbers equal across types; a sparse index
	// leaves out the documents without its field; a multikey index keys
	// each element, and missing fields key as null.
	got := dupCodes(insert(
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}, {Key: "tags", Value: bson.A{"p", "q"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1.0}, {Key: "b", Value: "x"}, {Key: "tags", Value: bson.A{"z"}}}, // ab taken
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 1}, {Key: "b", Value: "y"}, {Key: "tags", Value: bson.A{"q"}}},   // tags q taken
		bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 2}, {Key: "tags", Value: bson.A{"r", "r"}}},                      // ok: no s, sparse
		bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: 3}, {Key: "tags", Value: bson.A{"t"}}},                           // ok
		bson.D{{Key: "_id", Value: 6}, {Key: "a", Value: 4}},                                                              // ok: tags null
		bson.D{{Key: "_id", Value: 7}, {Key: "a", Value: 5}},                                                              // tags null taken
	))
	if fmt.Sprint(got) != "[1 2 6]" {
		t.Errorf("write errors at %v, want [1 2 6]", got)
	}
	reply = insert(bson.D{{Key: "_id", Value: 8}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}, {Key: "tags", Value: "u"}})
	if e := reply.Lookup("writeErrors", "0"); e.Type == 0 || relaxed(t, e.Document().Lookup("keyPattern").Document()) != `{"a":1,"b":-1}` ||
		relaxed(t, e.Document().Lookup("keyValue").Document()) != `{"a":1,"b":"x"}` ||
		e.Document().Lookup("errmsg").StringValue() != `E11000 duplicate key error collection: x.i index: ab dup key: { a: 1, b: "x" }` {
		t.Errorf("a compound duplicate: %s", reply)
	}
	// The same index again is no change; another one under its name is a
	// conflict.
	reply = create(bson.D{{Key: "key", Value: bson.D{{Key: "s", Value: 1}}}, {Key: "name", Value: "s"}, {Key: "unique", Value: true}, {Key: "sparse", Value: true}})
	checkOK(t, reply)
	if reply.Lookup("note").StringValue() != "all indexes already exist" {
		t.Errorf("creating an existing index: %s", reply)
	}
	checkError(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "z", Value: 1}}}, {Key: "name", Value: "s"}}), 86, "IndexKeySpecsConflict")
	// The same signature under another name is a conflict; a key pattern
	// without its unique and sparse is another signature, so another
	// index, since MongoDB 4.9 (SERVER-47657).
	checkError(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "s", Value: 1}}}, {Key: "name", Value: "other"}, {Key: "sparse", Value: true}, {Key: "unique", Value: true}}), 85, "IndexOptionsConflict")
	checkOK(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "s", Value: 1}}}, {Key: "name", Value: "other"}}))
	checkError(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "t", Value: 1}}}, {Key: "name", Value: "t"}, {Key: "expireAfterSeconds", Value: 5}}), 2, "BadValue")
	checkError(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "t", Value: 1}}}, {Key: "name", Value: "t"}, {Key: "bogus", Value: 5}}), 197, "InvalidIndexSpecificationOption")
	checkError(t, r.run(cmd("x", bson.E{Key: "dropIndexes", Value: "i"}, bson.E{Key: "index", Value: "_id_"})), 72, "InvalidOptions")
	checkError(t, r.run(cmd("x", bson.E{Key: "listIndexes", Value: "none"})), 26, "NamespaceNotFound")
	checkError(t, r.run(cmd("x", bson.E{Key: "find", Value: "i"}, bson.E{Key: "hint", Value: "nope"})), 2, "BadValue")
	checkOK(t, r.run(cmd("x", bson.E{Key: "find", Value: "i"}, bson.E{Key: "hint", Value: "ab"})))
	reply = r.run(cmd("x", bson.E{Key: "dropIndexes", Value: "i"}, bson.E{Key: "index", Value: "*"}))
	checkOK(t, reply)
	if n := reply.Lookup("nIndexesWas").AsInt64(); n != 5 {
		t.Errorf("dropIndexes *: %s", reply)
	}
	if got := dupCodes(insert(bson.D{{Key: "_id", Value: 9}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}})); got != nil {
		t.Errorf("after dropping the indexes: write errors at %v", got)
	}
}
