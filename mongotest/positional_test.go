package mongotest_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestPositionalUpdates: the positional operator $, the all-positional
// operator $[] and the filtered positional operator $[<identifier>] with
// arrayFilters, as mongod applies them and refuses them.
func TestPositionalUpdates(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	type D = bson.D
	type A = bson.A
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	set := func(fields ...bson.E) D { return D{e("$set", D(fields))} }
	for i, tc := range []struct {
		name    string
		doc     D
		q       D // the query; nil for {}
		u       D
		filters A
		// want is the document after the update, or the write error's
		// "code: errmsg"; "upsert: " before it makes the update an upsert.
		want string
	}{
		{"$ takes the element the query matched", D{e("_id", 1), e("a", A{D{e("s", "x"), e("n", 1)}, D{e("s", "y"), e("n", 1)}})}, D{e("a.s", "y")}, set(e("a.$.n", 2)), nil, `{"_id":1,"a":[{"s":"x","n":1},{"s":"y","n":2}]}`},
		{"$ with $elemMatch", D{e("_id", 1), e("a", A{D{e("s", 1), e("t", 1)}, D{e("s", 1), e("t", 2)}})}, D{e("_id", 1), e("a", D{e("$elemMatch", D{e("s", 1), e("t", 2)})})}, D{e("$inc", D{e("a.$.t", 10)})}, nil, `{"_id":1,"a":[{"s":1,"t":1},{"s":1,"t":12}]}`},
		{"$ of scalar elements, the first that matches", D{e("_id", 1), e("a", A{5, 7, 9})}, D{e("a", D{e("$gt", 6)})}, set(e("a.$", 0)), nil, `{"_id":1,"a":[5,0,9]}`},
		{"$ with $[] after it", D{e("_id", 1), e("a", A{D{e("k", 1), e("b", A{1, 2})}, D{e("k", 2), e("b", A{3})}})}, D{e("a.k", 2)}, D{e("$inc", D{e("a.$.b.$[]", 1)})}, nil, `{"_id":1,"a":[{"k":1,"b":[1,2]},{"k":2,"b":[4]}]}`},
		{"$ without a match from the query", D{e("_id", 1), e("a", A{1})}, nil, set(e("a.$", 2)), nil, "2: The positional operator did not find the match needed from the query."},
		{"$ in an upsert's new document", D{e("_id", 0)}, D{e("_id", 9), e("a.k", 1)}, set(e("a.$.v", 1)), nil, "upsert: 2: The positional operator did not find the match needed from the query."},
		{"$ twice in a path", D{e("_id", 1), e("a", A{1})}, D{e("a", 1)}, set(e("a.$.b.$", 2)), nil, "2: Too many positional (i.e. '$') elements found in path 'a.$.b.$'"},
		{"$ in the first position", D{e("_id", 1)}, nil, set(e("$", 2)), nil, "2: Cannot have positional (i.e. '$') element in the first position in path '$'"},
		{"$[] sets a field of each element", D{e("_id", 1), e("a", A{D{e("b", 1)}, D{e("c", 2)}})}, nil, set(e("a.$[].b", 0)), nil, `{"_id":1,"a":[{"b":0},{"c":2,"b":0}]}`},
		{"$[] increments each element", D{e("_id", 1), e("a", A{1, 2, 3})}, nil, D{e("$inc", D{e("a.$[]", 10)})}, nil, `{"_id":1,"a":[11,12,13]}`},
		{"$[] of an empty array changes nothing", D{e("_id", 1), e("a", A{})}, nil, set(e("a.$[].b", 1)), nil, `{"_id":1,"a":[]}`},
		{"$[x] takes the elements its filter matches", D{e("_id", 1), e("a", A{1, 2, 3})}, nil, set(e("a.$[x]", 0)), A{D{e("x", D{e("$gte", 2)})}}, `{"_id":1,"a":[1,0,0]}`},
		{"$[x] on a field of the elements", D{e("_id", 1), e("a", A{D{e("g", 80)}, D{e("g", 90)}})}, nil, set(e("a.$[x].top", true)), A{D{e("x.g", D{e("$gte", 85)})}}, `{"_id":1,"a":[{"g":80},{"g":90,"top":true}]}`},
		{"a filter with two conditions", D{e("_id", 1), e("a", A{D{e("g", 1), e("h", 1)}, D{e("g", 1), e("h", 2)}})}, nil, D{e("$unset", D{e("a.$[x].g", "")})}, A{D{e("x.g", 1), e("x.h", 2)}}, `{"_id":1,"a":[{"g":1,"h":1},{"h":2}]}`},
		{"nested positional operators", D{e("_id", 1), e("a", A{D{e("b", A{1, 2})}, D{e("b", A{3})}})}, nil, D{e("$inc", D{e("a.$[].b.$[y]", 100)})}, A{D{e("y", D{e("$gt", 1)})}}, `{"_id":1,"a":[{"b":[1,102]},{"b":[103]}]}`},
		{"$push into the matched elements", D{e("_id", 1), e("a", A{D{e("k", "p"), e("l", A{})}, D{e("k", "q"), e("l", A{})}})}, nil, D{e("$push", D{e("a.$[m].l", 7)})}, A{D{e("m.k", "q")}}, `{"_id":1,"a":[{"k":"p","l":[]},{"k":"q","l":[7]}]}`},
		{"two identifiers in one filter", D{e("_id", 1), e("a", A{1})}, nil, set(e("a.$[x]", 0)), A{D{e("x", 1), e("y", 1)}}, "9: Error parsing array filter :: caused by :: Expected a single top-level field name, found 'x' and 'y'"},
		{"an identifier without a filter", D{e("_id", 1), e("a", A{1})}, nil, set(e("a.$[z]", 0)), nil, "2: No array filter found for identifier 'z' in path 'a.$[z]'"},
		{"a filter the update does not use", D{e("_id", 1), e("a", A{1})}, nil, set(e("a", 0)), A{D{e("x", 1)}}, "9: The array filter for identifier 'x' was not used in the update { $set: { a: 0 } }"},
		{"an identifier that is not one", D{e("_id", 1), e("a", A{1})}, nil, set(e("a.$[X]", 0)), A{D{e("X", 1)}}, "2: Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found 'X'"},
		{"two filters of one identifier", D{e("_id", 1), e("a", A{1})}, nil, set(e("a.$[x]", 0)), A{D{e("x", 1)}, D{e("x", 2)}}, "9: Found multiple array filters with the same top-level field name x"},
		{"an array that is not there", D{e("_id", 1)}, nil, set(e("a.$[].b", 0)), nil, "2: The path 'a' must exist in the document in order to apply array updates."},
		{"a field that is not an array", D{e("_id", 1), e("a", 5)}, nil, set(e("a.$[]", 0)), nil, "2: Cannot apply array updates to non-array element a: 5"},
		{"an element that cannot hold the field", D{e("_id", 1), e("a", A{D{}, 1})}, nil, set(e("a.$[].b", 0)), nil, "28: Cannot create field 'b' in element {1: 1}"},
		{"in the first position", D{e("_id", 1)}, nil, set(e("$[]", 0)), nil, "2: Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '$[]'"},
		{"two paths that reach one element", D{e("_id", 1), e("a", A{1, 2})}, nil, set(e("a.$[x]", 0), e("a.$[y]", 1)), A{D{e("x", 1)}, D{e("y", D{e("$lt", 5)})}}, "40: Update created a conflict at 'a.0'"},
		{"$rename from a positional path", D{e("_id", 1), e("a", A{D{e("b", 1)}})}, nil, D{e("$rename", D{e("a.$[].b", "c")})}, nil, "2: The source field for $rename may not be dynamic: a.$[].b"},
	} {
		name := fmt.Sprintf("p%d", i)
		checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: name}, bson.E{Key: "documents", Value: bson.A{tc.doc}})))
		q := tc.q
		if q == nil {
			q = D{}
		}
		stmt := bson.D{{Key: "q", Value: q}, {Key: "u", Value: tc.u}}
		want, upsert := strings.CutPrefix(tc.want, "upsert: ")
		if upsert {
			stmt = append(stmt, bson.E{Key: "upsert", Value: true})
		}
		if tc.filters != nil {
			stmt = append(stmt, bson.E{Key: "arrayFilters", Value: tc.filters})
		}
		reply := r.run(cmd("x", bson.E{Key: "update", Value: name}, bson.E{Key: "updates", Value: bson.A{stmt}}))
		var got string
		if we, err := reply.LookupErr("writeErrors", "0"); err == nil {
			got = fmt.Sprintf("%d: %s", we.Document().Lookup("code").AsInt64(), we.Document().Lookup("errmsg").StringValue())
		} else {
			checkOK(t, reply)
			found := r.run(cmd("x", bson.E{Key: "find", Value: name}))
			checkOK(t, found)
			got = relaxed(t, found.Lookup("cursor", "firstBatch", "0").Document())
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestDriverArrayFilters: the official driver's arrayFilters, in an
// updateMany, a findOneAndUpdate and a client bulk write (MongoDB 8.0),
// and the positional operator $ in an updateOne.
func TestDriverArrayFilters(t *testing.T) {
	srv := start(t, mongotest.WithVersion("8.0"))
	client := connect(t, srv.URI())
	c := ctx(t)
	coll := client.Database("db").Collection("grades")
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.A{95, 80, 100}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: bson.A{70, 101}}},
	}); err != nil {
		t.Fatal(err)
	}
	res, err := coll.UpdateMany(c, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "g.$[big]", Value: 100}}}},
		options.UpdateMany().SetArrayFilters([]any{bson.D{{Key: "big", Value: bson.D{{Key: "$gt", Value: 100}}}}}))
	if err != nil || res.MatchedCount != 2 || res.ModifiedCount != 1 {
		t.Fatalf("UpdateMany: %+v, %v; want 2 matched, 1 modified", res, err)
	}
	var doc struct {
		G []int32 `bson:"g"`
	}
	err = coll.FindOneAndUpdate(c, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "g.$[low]", Value: 5}}}},
		options.FindOneAndUpdate().SetArrayFilters([]any{bson.D{{Key: "low", Value: bson.D{{Key: "$lt", Value: 90}}}}}).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil || fmt.Sprint(doc.G) != "[95 85 100]" {
		t.Fatalf("FindOneAndUpdate: %v, %v; want [95 85 100]", doc.G, err)
	}
	_, err = client.BulkWrite(c, []mongo.ClientBulkWrite{{Database: "db", Collection: "grades", Model: mongo.NewClientUpdateManyModel().
		SetFilter(bson.D{}).SetUpdate(bson.D{{Key: "$mul", Value: bson.D{{Key: "g.$[all]", Value: 2}}}}).
		SetArrayFilters([]any{bson.D{{Key: "all", Value: bson.D{{Key: "$exists", Value: true}}}}})}})
	if err != nil {
		t.Fatalf("BulkWrite with arrayFilters: %v", err)
	}
	wantDocs(t, "grades", collDocs(t, coll), `{"_id":1,"g":[190,170,200]}`, `{"_id":2,"g":[140,200]}`)
	// $: the element the query matched.
	if res, err := coll.UpdateOne(c, bson.D{{Key: "g", Value: 200}}, bson.D{{Key: "$set", Value: bson.D{{Key: "g.$", Value: 0}}}}); err != nil || res.ModifiedCount != 1 {
		t.Fatalf("UpdateOne with $: %+v, %v", res, err)
	}
	wantDocs(t, "grades", collDocs(t, coll), `{"_id":1,"g":[190,170,0]}`, `{"_id":2,"g":[140,200]}`)
}

// TestPositionalProjection: find's projection {"a.$": 1} returns, of the
// array a, the element the query matched; the projections mongod refuses
// are refused as it refuses them.
func TestPositionalProjection(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	type D = bson.D
	type A = bson.A
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	checkOK(t, r.run(cmd("x", e("insert", "pp"), e("documents", A{
		D{e("_id", 1), e("name", "one"), e("g", A{80, 85, 90}), e("items", A{D{e("sku", "a"), e("qty", 1)}, D{e("sku", "b"), e("qty", 1)}, D{e("sku", "b"), e("qty", 5)}})},
		D{e("_id", 2), e("name", "two"), e("g", A{99}), e("items", A{D{e("sku", "c"), e("qty", 2)}})},
	}))))
	for _, tc := range []struct {
		name       string
		filter     D
		projection D
		want       string // the documents, or "code: errmsg"
	}{
		{"the first element a condition matched", D{e("g", D{e("$gte", 85)})}, D{e("g.$", 1)}, `{"_id":1,"g":[85]} {"_id":2,"g":[99]}`},
		{"with other fields", D{e("items.sku", "b")}, D{e("name", 1), e("items.$", 1)}, `{"_id":1,"name":"one","items":[{"sku":"b","qty":1}]}`},
		{"by $elemMatch", D{e("items", D{e("$elemMatch", D{e("sku", "b"), e("qty", D{e("$gt", 1)})})})}, D{e("_id", 0), e("items.$", true)}, `{"items":[{"sku":"b","qty":5}]}`},
		{"a query with no condition on the array", D{e("_id", 1)}, D{e("g.$", 1)}, "51246: Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array"},
		{"two positional projections", D{e("g", 80)}, D{e("g.$", 1), e("items.$", 1)}, "2: Cannot specify more than one positional projection per query."},
		{"in the middle of a path", D{e("g", 80)}, D{e("items.$.sku", 1)}, "2: As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent."},
		{"an exclusion", D{e("g", 80)}, D{e("g.$", 0)}, "2: the positional projection g.$ must be an inclusion (1 or true)"},
		{"with the array itself", D{e("g", 80)}, D{e("g", 1), e("g.$", 1)}, "31250: Path collision at g.$"},
	} {
		reply := r.run(cmd("x", e("find", "pp"), e("filter", tc.filter), e("projection", tc.projection), e("sort", D{e("_id", 1)})))
		if got := foundOrError(t, reply); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	// $project has no positional projection: refused there.
	reply := r.run(cmd("x", e("aggregate", "pp"), e("pipeline", A{D{e("$project", D{e("g.$", 1)})}}), e("cursor", D{})))
	if reply.Lookup("ok").Double() == 1 || !strings.Contains(reply.Lookup("errmsg").StringValue(), "positional projection g.$") {
		t.Errorf("$project with a positional projection: %s", reply)
	}
}

// TestSliceProjection: the projection operator $slice of find and
// findAndModify: the first n elements, the last n, [skip, limit]; alone it
// returns every field, beside inclusions only those; not an array, the
// value as it is.
func TestSliceProjection(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	type D = bson.D
	type A = bson.A
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	checkOK(t, r.run(cmd("x", e("insert", "sl"), e("documents", A{D{e("_id", 1), e("a", A{1, 2, 3, 4, 5}), e("b", "x"), e("c", D{e("d", A{1, 2, 3})})}}))))
	sl := func(v any) D { return D{e("$slice", v)} }
	for _, tc := range []struct {
		name       string
		projection D
		want       string // the document, or "code: errmsg"
	}{
		{"the first n, alone: every field", D{e("a", sl(2))}, `{"_id":1,"a":[1,2],"b":"x","c":{"d":[1,2,3]}}`},
		{"the last n", D{e("a", sl(-2))}, `{"_id":1,"a":[4,5],"b":"x","c":{"d":[1,2,3]}}`},
		{"[skip, limit]", D{e("_id", 0), e("a", sl(A{1, 2})), e("b", 1)}, `{"a":[2,3],"b":"x"}`},
		{"[skip from the end, limit]", D{e("a", sl(A{-2, 5})), e("b", 1)}, `{"_id":1,"a":[4,5],"b":"x"}`},
		{"more than there are", D{e("a", sl(10)), e("b", 1)}, `{"_id":1,"a":[1,2,3,4,5],"b":"x"}`},
		{"the largest limit", D{e("a", sl(A{1, int64(math.MaxInt64)})), e("b", 1)}, `{"_id":1,"a":[2,3,4,5],"b":"x"}`},
		{"the smallest skip and n", D{e("a", sl(A{int64(math.MinInt64), 1})), e("c", sl(int64(math.MinInt64)))}, `{"_id":1,"a":[1],"b":"x","c":{"d":[1,2,3]}}`},
		{"with an exclusion", D{e("a", sl(1)), e("c", 0)}, `{"_id":1,"a":[1],"b":"x"}`},
		{"a nested array", D{e("c.d", sl(1))}, `{"_id":1,"a":[1,2,3,4,5],"b":"x","c":{"d":[1]}}`},
		{"not an array", D{e("b", sl(1)), e("a", 1)}, `{"_id":1,"a":[1,2,3,4,5],"b":"x"}`},
		{"an array of one", D{e("a", sl(A{1}))}, "2: $slice of a takes a number or an array of two, [skip, limit]; got an array of 1"},
		{"a limit of 0", D{e("a", sl(A{0, 0}))}, "2: $slice of a: the limit must be positive, not 0"},
		{"a string", D{e("a", sl("x"))}, "2: $slice of a takes a number or an array of two, [skip, limit], not a string"},
	} {
		reply := r.run(cmd("x", e("find", "sl"), e("projection", tc.projection)))
		if got := foundOrError(t, reply); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	// findAndModify's fields take it too; $project has the expression.
	reply := r.run(cmd("x", e("findAndModify", "sl"), e("query", D{}), e("update", D{e("$set", D{e("b", "y")})}), e("new", true), e("fields", D{e("a", sl(-1)), e("b", 1)})))
	checkOK(t, reply)
	if got := relaxed(t, reply.Lookup("value").Document()); got != `{"_id":1,"a":[5],"b":"y"}` {
		t.Errorf("findAndModify with $slice: %s", got)
	}
	reply = r.run(cmd("x", e("aggregate", "sl"), e("pipeline", A{D{e("$project", D{e("a", sl(2))})}}), e("cursor", D{})))
	if reply.Lookup("ok").Double() == 1 {
		t.Errorf("$project with the projection operator $slice: %s", reply)
	}
}

// TestElemMatchProjection: the projection operator $elemMatch of find and
// findAndModify returns the first element that matches, as an inclusion;
// none matching, or no array, leaves the field out.
func TestElemMatchProjection(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	type D = bson.D
	type A = bson.A
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	checkOK(t, r.run(cmd("x", e("insert", "em"), e("documents", A{
		D{e("_id", 1), e("s", A{D{e("n", "a"), e("g", 1)}, D{e("n", "b"), e("g", 2)}, D{e("n", "c"), e("g", 2)}}), e("v", A{3, 8, 9}), e("o", 1)},
	}))))
	em := func(cond D) D { return D{e("$elemMatch", cond)} }
	for _, tc := range []struct {
		name       string
		projection D
		want       string // the document, or "code: errmsg"
	}{
		{"the first document that matches", D{e("s", em(D{e("g", 2)}))}, `{"_id":1,"s":[{"n":"b","g":2}]}`},
		{"a scalar by an operator", D{e("v", em(D{e("$gt", 5)})), e("o", 1)}, `{"_id":1,"v":[8],"o":1}`},
		{"none matches: the field is left out", D{e("s", em(D{e("g", 7)}))}, `{"_id":1}`},
		{"not an array: left out", D{e("o", em(D{e("$gt", 0)}))}, `{"_id":1}`},
		{"a nested field", D{e("s.n", em(D{e("g", 2)}))}, "2: Cannot use $elemMatch projection on a nested field."},
		{"not an object", D{e("s", D{e("$elemMatch", 1)})}, "2: elemMatch: Invalid argument, object required, but got int"},
		{"with an exclusion", D{e("s", em(D{e("g", 2)})), e("o", 0)}, "31254: Cannot do exclusion on field o in inclusion projection"},
	} {
		reply := r.run(cmd("x", e("find", "em"), e("projection", tc.projection)))
		if got := foundOrError(t, reply); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	reply := r.run(cmd("x", e("findAndModify", "em"), e("query", D{}), e("update", D{e("$set", D{e("o", 2)})}), e("fields", D{e("v", em(D{e("$lt", 5)}))})))
	checkOK(t, reply)
	if got := relaxed(t, reply.Lookup("value").Document()); got != `{"_id":1,"v":[3]}` {
		t.Errorf("findAndModify with $elemMatch: %s", got)
	}
}

// foundOrError returns the documents of find's first batch in reply, as
// relaxed extended JSON separated by spaces, or the error's "code: errmsg".
func foundOrError(t *testing.T, reply bson.Raw) string {
	t.Helper()
	if reply.Lookup("ok").Double() != 1 {
		return fmt.Sprintf("%d: %s", reply.Lookup("code").AsInt64(), reply.Lookup("errmsg").StringValue())
	}
	var docs []string
	for _, v := range arrayValues(t, reply.Lookup("cursor", "firstBatch")) {
		docs = append(docs, relaxed(t, v.Document()))
	}
	return strings.Join(docs, " ")
}
