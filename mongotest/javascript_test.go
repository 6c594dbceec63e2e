package mongotest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Server-side JavaScript: $where, $function and $accumulator, and the
// sleep(ms) that the specifications' tests call from a $where to hold a
// connection. The references:
//   - $where: https://www.mongodb.com/docs/manual/reference/operator/query/where/
//   - $function: https://www.mongodb.com/docs/manual/reference/operator/aggregation/function/
//   - $accumulator: https://www.mongodb.com/docs/manual/reference/operator/aggregation/accumulator/
//   - the error codes: https://www.mongodb.com/docs/manual/reference/error-codes/

// seedJS inserts three documents into x.c and returns the collection.
func seedJS(t *testing.T, srv *mongotest.Server) *mongo.Collection {
	t.Helper()
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	if _, err := coll.InsertMany(ctx(t), []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}, {Key: "name", Value: "a"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}, {Key: "name", Value: "b"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 3}, {Key: "name", Value: "c"}},
	}); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	return coll
}

// whereIDs returns the _id of the documents filter finds, in order.
func whereIDs(t *testing.T, coll *mongo.Collection, filter any) []string {
	t.Helper()
	cur, err := coll.Find(ctx(t), filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatalf("Find(%v): %v", filter, err)
	}
	return allRelaxed(t, cur)
}

func where(code any) bson.D { return bson.D{{Key: "$where", Value: code}} }

func TestWhereDriver(t *testing.T) {
	srv := start(t)
	coll := seedJS(t, srv)
	c := ctx(t)
	one, two, three := `{"_id":1}`, `{"_id":2}`, `{"_id":3}`
	for _, tc := range []struct {
		what   string
		filter any
		want   []string
	}{
		// The manual's forms: an expression, a function as a string or as
		// BSON JavaScript, this or obj for the document.
		{"true", where("true"), []string{one, two, three}},
		{"false", where("false"), nil},
		{"this.x > 1", where("this.x > 1"), []string{two, three}},
		{"obj", where("obj.name == 'b'"), []string{two}},
		{"a function string", where("function() { return this.x >= 2 }"), []string{two, three}},
		{"BSON JavaScript", where(bson.JavaScript("function() { return obj.x == 3 }")), []string{three}},
		{"a named function", where("function isTwo() { return this.x == 2 }"), []string{two}},
		// mongod returns the last expression of statements, and runs a
		// bare return as a function body.
		{"statements", where("var y = this.x * 2; y == 4;"), []string{two}},
		{"a return", where("return this.name != 'a'"), []string{two, three}},
		// The result counts by its truth: 0 and "" are false.
		{"a number", where("this.x - 2"), []string{one, three}},
		{"the spec tests' sleep", where("sleep(1) || true"), []string{one, two, three}},
		// $where sits at the top level, or in $and, $or and $nor there.
		{"in $or", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "x", Value: 1}}, where("this.x == 3")}}}, []string{one, three}},
		{"with a field", bson.D{{Key: "name", Value: "b"}, {Key: "$where", Value: "this.x == 2"}}, []string{two}},
	} {
		wantDocs(t, tc.what, whereIDs(t, coll, tc.filter), tc.want...)
	}

	// sleep waits as long as it is told: the specifications' tests hold a
	// connection with it.
	began := time.Now()
	wantDocs(t, "sleep(100)", whereIDs(t, coll, where("sleep(100) || this.x == 1")), one)
	if d := time.Since(began); d < 3*100*time.Millisecond {
		t.Errorf("three sleep(100) took %v", d)
	}

	// The commands that take a query filter run it: count, distinct,
	// update, delete and findAndModify.
	db := coll.Database()
	var count struct{ N int }
	if err := db.RunCommand(c, bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: where("this.x < 3")}}).Decode(&count); err != nil || count.N != 2 {
		t.Errorf("count: %+v, %v; want n 2", count, err)
	}
	var names []string
	if err := coll.Distinct(c, "name", where("this.x != 2")).Decode(&names); err != nil || strings.Join(names, ",") != "a,c" {
		t.Errorf("Distinct: %v, %v", names, err)
	}
	res, err := coll.UpdateMany(c, where("this.x >= 2"), bson.D{{Key: "$set", Value: bson.D{{Key: "big", Value: true}}}})
	if err != nil || res.MatchedCount != 2 || res.ModifiedCount != 2 {
		t.Errorf("UpdateMany: %+v, %v", res, err)
	}
	var got bson.Raw
	if err := coll.FindOneAndUpdate(c, where("this.big && this.x == 3"), bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&got); err != nil {
		t.Fatalf("FindOneAndUpdate: %v", err)
	}
	if relaxed(t, got) != `{"_id":3,"x":4,"name":"c","big":true}` {
		t.Errorf("FindOneAndUpdate returned %s", relaxed(t, got))
	}
	del, err := coll.DeleteMany(c, where("!this.big"))
	if err != nil || del.DeletedCount != 1 {
		t.Errorf("DeleteMany: %+v, %v", del, err)
	}
	wantDocs(t, "after the writes", collDocs(t, coll),
		`{"_id":2,"x":2,"name":"b","big":true}`, `{"_id":3,"x":4,"name":"c","big":true}`)
}

// TestWhereDocumentTypes checks how $where sees a document's BSON types,
// as mongod's JavaScript does: numbers, strings, booleans, null, Date,
// ObjectId (with str), NumberLong, arrays and nested documents.
func TestWhereDocumentTypes(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("types")
	c := ctx(t)
	id := bson.NewObjectID()
	dec15, err := bson.ParseDecimal128("1.5")
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if _, err := coll.InsertOne(c, bson.D{
		{Key: "_id", Value: id}, {Key: "i", Value: int32(5)}, {Key: "l", Value: int64(1) << 40}, {Key: "d", Value: 2.5},
		{Key: "s", Value: "str"}, {Key: "b", Value: true}, {Key: "z", Value: nil}, {Key: "t", Value: when},
		{Key: "arr", Value: bson.A{1, "two", bson.D{{Key: "three", Value: 3}}}},
		{Key: "sub", Value: bson.D{{Key: "deep", Value: bson.D{{Key: "er", Value: "x"}}}}},
		{Key: "dec", Value: dec15},
	}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	for _, cond := range []string{
		"typeof this.i == 'number' && this.i === 5",
		"this.l == 1099511627776 && this.l.toNumber() == 1099511627776 && this.l instanceof NumberLong",
		"this.d === 2.5 && this.s === 'str' && this.b === true && this.z === null && this.missing === undefined",
		"this.t instanceof Date && this.t.getTime() == " + "1714979289000",
		"this._id instanceof ObjectId && this._id.str == '" + id.Hex() + "' && this._id.equals(ObjectId('" + id.Hex() + "'))",
		"Array.isArray(this.arr) && this.arr.length == 3 && this.arr[1] == 'two' && this.arr[2].three == 3",
		"this.sub.deep.er == 'x' && Object.keys(this).join() == '_id,i,l,d,s,b,z,t,arr,sub,dec'",
		"this.dec instanceof NumberDecimal && this.dec.toString() == 'NumberDecimal(\"1.5\")'",
	} {
		if got := whereIDs(t, coll, where(cond)); len(got) != 1 {
			t.Errorf("$where %q matched nothing", cond)
		}
	}
}

// TestWhereRefused checks that $where fails where mongod refuses it, with
// mongod's codes and messages (its MatchExpressionParser and
// ExtensionsCallback).
func TestWhereRefused(t *testing.T) {
	srv := start(t)
	coll := seedJS(t, srv)
	r := dialRaw(t, srv)
	find := func(filter any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: filter}))
	}
	for _, tc := range []struct {
		what   string
		filter any
		msg    string
	}{
		{"in $elemMatch", bson.D{{Key: "a", Value: bson.D{{Key: "$elemMatch", Value: where("true")}}}}, "$where can only be applied to the top-level document"},
		{"in $elemMatch's $and", bson.D{{Key: "a", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$and", Value: bson.A{where("true")}}}}}}}, "$where can only be applied to the top-level document"},
		{"on a field", bson.D{{Key: "a", Value: where("true")}}, "unknown operator: $where"},
		{"a number", where(1), "$where got bad type"},
		{"code with scope", where(bson.CodeWithScope{Code: "true", Scope: bson.D{}}), "$where no longer supports deprecated BSON type CodeWScope"},
	} {
		if msg := checkError(t, find(tc.filter), 2, "BadValue"); msg != tc.msg {
			t.Errorf("%s: errmsg %q, want %q", tc.what, msg, tc.msg)
		}
	}
	// Aggregation's $match takes no $where, and so countDocuments, which
	// runs one, cannot use it (crud.md, "countDocuments"; the manual's
	// $match restrictions).
	reply := r.run(cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}},
		bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: where("true")}}}}))
	if msg := checkError(t, reply, 2, "BadValue"); msg != "$where is not allowed in this context" {
		t.Errorf("$where in $match: %q", msg)
	}
	_, err := coll.CountDocuments(ctx(t), where("true"))
	wantCode(t, "CountDocuments with $where", err, 2, "$where is not allowed in this context")
}

// TestWhereJavaScriptErrors checks the failures of the JavaScript itself:
// JSInterpreterFailure (139) with the error and its stack, as mongod's
// where_tolerates_js_exception.js expects.
func TestWhereJavaScriptErrors(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	find := func(coll string, filter any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "find", Value: coll}, bson.E{Key: "filter", Value: filter}))
	}
	// mongod compiles a $where as it parses the filter: a syntax error
	// fails even on a collection that does not exist.
	if msg := checkError(t, find("none", where("this.x ==")), 139, "JSInterpreterFailure"); !strings.Contains(msg, "SyntaxError") {
		t.Errorf("syntax error: %q", msg)
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	msg := checkError(t, find("c", where(bson.JavaScript("function myFunction() {\n  return a();\n}"))), 139, "JSInterpreterFailure")
	if !strings.Contains(msg, "ReferenceError") || !strings.Contains(msg, "myFunction@") {
		t.Errorf("a ReferenceError: %q; want the error and the stack", msg)
	}
	if msg := checkError(t, find("c", where("throw 'boom'")), 139, "JSInterpreterFailure"); !strings.Contains(msg, "boom") {
		t.Errorf("a thrown string: %q", msg)
	}
	if msg := checkError(t, find("c", where("sleep('x')")), 139, "JSInterpreterFailure"); !strings.Contains(msg, "sleep takes a single numeric argument") {
		t.Errorf("sleep('x'): %q", msg)
	}
	if msg := checkError(t, find("c", where("function f() { return f() }")), 139, "JSInterpreterFailure"); !strings.Contains(msg, "recursion") {
		t.Errorf("endless recursion: %q", msg)
	}
}

// sendFind sends a find of x.c with filter on r and returns at once.
func sendFind(t *testing.T, r *rawConn, filter any, fields ...bson.E) {
	t.Helper()
	body := cmd("x", append([]bson.E{{Key: "find", Value: "c"}, {Key: "filter", Value: filter}}, fields...)...)
	r.sendMsg(&wire.Msg{Body: marshal(t, body)}, nil)
}

// replyOf reads the reply to the command sent last on r.
func replyOf(t *testing.T, r *rawConn) bson.Raw {
	t.Helper()
	_, reply, err := wire.DecodeReply(r.read(), 0)
	if err != nil {
		t.Fatalf("decoding the reply: %v", err)
	}
	return reply.Body
}

// waitJS waits until n calls into JavaScript run on srv.
func waitJS(t *testing.T, srv *mongotest.Server, n int64) {
	t.Helper()
	waitFor(t, "JavaScript running", func() bool { return srv.Stats().JavaScriptRunning == n })
}

// interrupted returns how many calls into JavaScript srv stopped for why.
func interrupted(srv *mongotest.Server, why string) int64 {
	return srv.Stats().JavaScriptInterrupted[why]
}

// TestWhereSleepMaxTimeMS checks that the command's maxTimeMS stops a
// sleeping $where with MaxTimeMSExpired (50), as mongod's
// where_function_interrupt.js expects.
func TestWhereSleepMaxTimeMS(t *testing.T) {
	srv := start(t)
	coll := seedJS(t, srv)
	r := dialRaw(t, srv)
	sendFind(t, r, where("sleep(60000) || true"), bson.E{Key: "maxTimeMS", Value: 50})
	if msg := checkError(t, replyOf(t, r), 50, "MaxTimeMSExpired"); msg != "operation exceeded time limit" {
		t.Errorf("errmsg %q", msg)
	}
	// Through the driver, with the same maxTimeMS.
	err := coll.Database().RunCommand(ctx(t), bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: where("sleep(60000) || true")}, {Key: "maxTimeMS", Value: 50}}).Err()
	wantCode(t, "find with maxTimeMS", err, 50, "operation exceeded time limit")
	if n := interrupted(srv, "MaxTimeMSExpired"); n != 2 {
		t.Errorf("JavaScriptInterrupted[MaxTimeMSExpired] = %d, want 2", n)
	}
	if n := srv.Stats().JavaScriptRunning; n != 0 {
		t.Errorf("JavaScriptRunning = %d after the replies", n)
	}
}

// TestWhereSleepClientHangUp checks that the server stops a sleeping
// $where when its client hangs up, as mongod interrupts the operations
// of a client that disconnected (ClientDisconnect).
func TestWhereSleepClientHangUp(t *testing.T) {
	srv := start(t)
	seedJS(t, srv)
	r := dialRaw(t, srv)
	sendFind(t, r, where("sleep(600000) || true"))
	waitJS(t, srv, 1)
	r.nc.Close()
	waitFor(t, "the evaluation stopped", func() bool {
		return interrupted(srv, "ClientDisconnect") == 1 && srv.Stats().JavaScriptRunning == 0
	})
}

// TestWhereSleepDoesNotHoldReads checks that a find sleeping in $where
// does not hold up the commands of other connections: mongod yields its
// locks meanwhile.
func TestWhereSleepDoesNotHoldReads(t *testing.T) {
	srv := start(t)
	coll := seedJS(t, srv)
	r := dialRaw(t, srv)
	sendFind(t, r, where("sleep(600000) || true"))
	waitJS(t, srv, 1)
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 4}}); err != nil {
		t.Fatalf("InsertOne while a $where sleeps: %v", err)
	}
	if got := whereIDs(t, coll, bson.D{{Key: "_id", Value: 4}}); len(got) != 1 {
		t.Errorf("Find while a $where sleeps: %v", got)
	}
	if n := srv.Stats().JavaScriptRunning; n != 1 {
		t.Fatalf("JavaScriptRunning = %d; the $where should still sleep", n)
	}
	r.nc.Close()
	waitJS(t, srv, 0)
}

// TestJavaScriptTimeout checks the limit of one call into JavaScript,
// mongod's internalQueryJavaScriptFnTimeoutMillis, which fails with
// Interrupted (11601): an endless loop ends.
func TestJavaScriptTimeout(t *testing.T) {
	if _, err := mongotest.Start(mongotest.WithJavaScriptTimeout(0)); err == nil {
		t.Errorf("WithJavaScriptTimeout(0) accepted")
	}
	srv := start(t, mongotest.WithJavaScriptTimeout(50*time.Millisecond))
	coll := seedJS(t, srv)
	r := dialRaw(t, srv)
	sendFind(t, r, where("while (true) {}"))
	if msg := checkError(t, replyOf(t, r), 11601, "Interrupted"); !strings.Contains(msg, "JavaScript execution interrupted") {
		t.Errorf("an endless loop: %q", msg)
	}
	sendFind(t, r, where("sleep(600000) || true"))
	checkError(t, replyOf(t, r), 11601, "Interrupted")
	_, err := coll.Aggregate(ctx(t), bson.A{bson.D{{Key: "$addFields", Value: bson.D{{Key: "y", Value: function("function() { for (;;) {} }")}}}}})
	wantCode(t, "an endless $function", err, 11601, "JavaScript execution interrupted")
	if n := interrupted(srv, "Interrupted"); n != 3 {
		t.Errorf("JavaScriptInterrupted[Interrupted] = %d, want 3", n)
	}
}

// TestWhereStepDown checks that a step-down interrupts a write whose
// $where sleeps, as it interrupts every write in progress
// (InterruptedDueToReplStateChange, 11602), failing the whole command as
// mongod fails a batch on an interruption.
func TestWhereStepDown(t *testing.T) {
	rs := startRS(t, 2)
	p := rs.Primary()
	r := dialRaw(t, p)
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	r.sendMsg(&wire.Msg{Body: marshal(t, cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: where("sleep(600000) || true")}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}},
	}}))}, nil)
	waitJS(t, p, 1)
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatalf("StepDown: %v", err)
	}
	checkError(t, replyOf(t, r), 11602, "InterruptedDueToReplStateChange")
	if n := interrupted(p, "InterruptedDueToReplStateChange"); n != 1 {
		t.Errorf("JavaScriptInterrupted[InterruptedDueToReplStateChange] = %d, want 1", n)
	}
}

// TestWhereSleepServerClose checks that Close stops a sleeping $where and
// leaves no goroutine behind.
func TestWhereSleepServerClose(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, srv)
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	sendFind(t, r, where("sleep(600000) || true"))
	waitJS(t, srv, 1)
	closeAndCheck(t, srv)
}

// function builds {$function: {body, args, lang: "js"}}.
func function(body any, args ...any) bson.D {
	return bson.D{{Key: "$function", Value: bson.D{{Key: "body", Value: body}, {Key: "args", Value: append(bson.A{}, args...)}, {Key: "lang", Value: "js"}}}}
}

func pipeline(t *testing.T, coll *mongo.Collection, stages ...bson.D) []string {
	t.Helper()
	cur, err := coll.Aggregate(ctx(t), stages)
	if err != nil {
		t.Fatalf("Aggregate(%v): %v", stages, err)
	}
	return allRelaxed(t, cur)
}

func TestFunctionDriver(t *testing.T) {
	srv := start(t)
	coll := seedJS(t, srv)
	// The manual's example: $addFields with a function of fields.
	wantDocs(t, "$addFields", pipeline(t, coll,
		bson.D{{Key: "$addFields", Value: bson.D{{Key: "y", Value: function("function(x, name) { return name + x * 10 }", "$x", "$name")}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "y", Value: 1}}}}),
		`{"_id":1,"y":"a10"}`, `{"_id":2,"y":"b20"}`, `{"_id":3,"y":"c30"}`)
	// In $expr, of $match and of find: the result counts by its truth.
	isBig := function(bson.JavaScript("function(x) { return x > 1 }"), "$x")
	wantDocs(t, "$match $expr", pipeline(t, coll, bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: isBig}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}}}}), `{"_id":2}`, `{"_id":3}`)
	wantDocs(t, "find $expr", whereIDs(t, coll, bson.D{{Key: "$expr", Value: isBig}}), `{"_id":2}`, `{"_id":3}`)
	// $project and $group's _id.
	wantDocs(t, "$group", pipeline(t, coll,
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: function("function(x) { return x % 2 == 1 }", "$x")}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}),
		`{"_id":true,"n":2}`, `{"_id":false,"n":1}`)
	// What a function returns becomes BSON as mongod converts it: new
	// numbers are doubles; the fields of a document it was given keep
	// their types; the shell's types give theirs.
	var doc bson.Raw
	cur, err := coll.Aggregate(ctx(t), bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 1}}}},
		bson.D{{Key: "$replaceWith", Value: function(`function(doc) {
			return {same: doc, n: 1, half: 0.5, s: "s", b: false, nul: null, arr: [1, "a"],
				date: new Date(86400000), oid: ObjectId("0123456789abcdef01234567"),
				long: NumberLong("9007199254740993"), int: NumberInt(7), dec: NumberDecimal("1.5"),
				ts: Timestamp(5, 6), re: /ab+c/i, undef: undefined}
		}`, "$$ROOT")}},
	})
	if err != nil {
		t.Fatalf("Aggregate: %v", err)
	}
	if !cur.Next(ctx(t)) {
		t.Fatalf("no document: %v", cur.Err())
	}
	doc = cur.Current
	cur.Close(ctx(t))
	b, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"same":{"_id":{"$numberInt":"1"},"x":{"$numberInt":"1"},"name":"a"},"n":{"$numberDouble":"1.0"},"half":{"$numberDouble":"0.5"},` +
		`"s":"s","b":false,"nul":null,"arr":[{"$numberDouble":"1.0"},"a"],"date":{"$date":{"$numberLong":"86400000"}},` +
		`"oid":{"$oid":"0123456789abcdef01234567"},"long":{"$numberLong":"9007199254740993"},"int":{"$numberInt":"7"},` +
		`"dec":{"$numberDecimal":"1.5"},"ts":{"$timestamp":{"t":5,"i":6}},"re":{"$regularExpression":{"pattern":"ab+c","options":"i"}},"undef":{"$undefined":true}}`
	if string(b) != want {
		t.Errorf("converted:\n got %s\nwant %s", b, want)
	}
}

// TestFunctionRefused checks $function's parse and run errors, with the
// codes of mongod's ExpressionFunction.
func TestFunctionRefused(t *testing.T) {
	srv := start(t)
	seedJS(t, srv)
	r := dialRaw(t, srv)
	agg := func(x any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}},
			bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$addFields", Value: bson.D{{Key: "y", Value: x}}}}}}))
	}
	fn := func(fields ...bson.E) bson.D { return bson.D{{Key: "$function", Value: bson.D(fields)}} }
	body, args, lang := bson.E{Key: "body", Value: "function() { return 1 }"}, bson.E{Key: "args", Value: bson.A{}}, bson.E{Key: "lang", Value: "js"}
	for _, tc := range []struct {
		what string
		x    any
		code int32
	}{
		{"not an object", bson.D{{Key: "$function", Value: 1}}, 31260},
		{"no body", fn(args, lang), 31261},
		{"a body from a field", fn(bson.E{Key: "body", Value: "$name"}, args, lang), 31432},
		{"a number body", fn(bson.E{Key: "body", Value: 5}, args, lang), 31262},
		{"no args", fn(body, lang), 31263},
		{"no lang", fn(body, args), 31418},
		{"another lang", fn(body, args, bson.E{Key: "lang", Value: "python"}), 31419},
		{"args that are no array", fn(body, bson.E{Key: "args", Value: "$name"}, lang), 31266},
	} {
		checkError(t, agg(tc.x), tc.code, "Location"+itoa(tc.code))
	}
	if msg := checkError(t, agg(function("function() { return nope }")), 139, "JSInterpreterFailure"); !strings.Contains(msg, "ReferenceError") {
		t.Errorf("a ReferenceError: %q", msg)
	}
	// mongod compiles the body when it first runs it: none runs on an
	// empty collection.
	reply := r.run(cmd("x", bson.E{Key: "aggregate", Value: "empty"}, bson.E{Key: "cursor", Value: bson.D{}},
		bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$addFields", Value: bson.D{{Key: "y", Value: function("this is not JavaScript")}}}}}}))
	checkOK(t, reply)
	// $expr may not stand in $elemMatch, and takes only the expressions
	// mongotest implements.
	find := func(filter any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: filter}))
	}
	if msg := checkError(t, find(bson.D{{Key: "a", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$expr", Value: true}}}}}}), 2, "BadValue"); msg != "$expr can only be applied to the top-level document" {
		t.Errorf("$expr in $elemMatch: %q", msg)
	}
	if msg := checkError(t, find(bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$x", 1}}}}}), 2, "BadValue"); !strings.Contains(msg, "mongotest does not implement") {
		t.Errorf("$expr with $eq: %q", msg)
	}
	// A find projection does not run JavaScript here.
	reply = r.run(cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "projection", Value: bson.D{{Key: "y", Value: function("function() { return 1 }")}}}))
	if msg := checkError(t, reply, 2, "BadValue"); !strings.Contains(msg, "mongotest does not implement $function") {
		t.Errorf("$function in a find projection: %q", msg)
	}
}

func itoa(code int32) string {
	b, _ := bson.MarshalExtJSON(bson.D{{Key: "c", Value: code}}, false, false)
	s := string(b)
	return s[len(`{"c":`) : len(s)-1]
}

// TestFunctionExprTruth checks $expr's truth with the expressions
// mongotest implements: a field path's value counts by its truth.
func TestFunctionExprTruth(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	var docs []any
	for i, v := range []any{true, false, 0, 1, "", nil, bson.A{}} {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: v}})
	}
	docs = append(docs, bson.D{{Key: "_id", Value: 7}})
	if _, err := coll.InsertMany(ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	wantDocs(t, "$expr: $v", whereIDs(t, coll, bson.D{{Key: "$expr", Value: "$v"}}), `{"_id":0}`, `{"_id":3}`, `{"_id":4}`, `{"_id":6}`)
}

// TestAccumulatorDriver runs the manual's $accumulator example, and
// initArgs, and a group without finalize.
func TestAccumulatorDriver(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("books")
	var books []any
	for i, b := range []struct {
		author string
		copies int32
	}{{"Dante", 2}, {"Homer", 10}, {"Dante", 1}, {"Homer", 5}, {"Homer", 3}} {
		books = append(books, bson.D{{Key: "_id", Value: 8751 + i}, {Key: "author", Value: b.author}, {Key: "copies", Value: b.copies}})
	}
	if _, err := coll.InsertMany(ctx(t), books); err != nil {
		t.Fatal(err)
	}
	avg := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: bson.JavaScript("function() { return { count: 0, sum: 0 } }")},
		{Key: "accumulate", Value: bson.JavaScript("function(state, numCopies) { return { count: state.count + 1, sum: state.sum + numCopies } }")},
		{Key: "accumulateArgs", Value: bson.A{"$copies"}},
		{Key: "merge", Value: bson.JavaScript("function(state1, state2) { return { count: state1.count + state2.count, sum: state1.sum + state2.sum } }")},
		{Key: "finalize", Value: bson.JavaScript("function(state) { return (state.sum / state.count) }")},
		{Key: "lang", Value: "js"},
	}}}
	wantDocs(t, "the manual's average", pipeline(t, coll,
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$author"}, {Key: "avgCopies", Value: avg}}}}),
		`{"_id":"Dante","avgCopies":1.5}`, `{"_id":"Homer","avgCopies":6.0}`)
	// initArgs come from the group's first document; without finalize,
	// the state is the result. Its numbers are doubles: the state is a new
	// object, not a document from BSON whose int32s mongod would keep.
	collect := bson.D{{Key: "$accumulator", Value: bson.D{
		{Key: "init", Value: "function(first) { return { first: first, ids: [] } }"},
		{Key: "initArgs", Value: bson.A{"$_id"}},
		{Key: "accumulate", Value: "function(state, id, copies) { state.ids.push(id + ':' + copies); return state }"},
		{Key: "accumulateArgs", Value: bson.A{"$_id", "$copies"}},
		{Key: "merge", Value: "function(a, b) { return a }"},
	}}}
	wantDocs(t, "initArgs", pipeline(t, coll,
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$author"}, {Key: "c", Value: collect}}}}),
		`{"_id":"Dante","c":{"first":8751.0,"ids":["8751:2","8753:1"]}}`,
		`{"_id":"Homer","c":{"first":8752.0,"ids":["8752:10","8754:5","8755:3"]}}`)
}

// TestAccumulatorRefused checks $accumulator's errors, with the codes of
// mongod's AccumulatorJs.
func TestAccumulatorRefused(t *testing.T) {
	srv := start(t)
	seedJS(t, srv)
	r := dialRaw(t, srv)
	group := func(acc any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}},
			bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "a", Value: acc}}}}}}))
	}
	init := bson.E{Key: "init", Value: "function() { return 0 }"}
	accumulate := bson.E{Key: "accumulate", Value: "function(s, x) { return s + x }"}
	args := bson.E{Key: "accumulateArgs", Value: bson.A{"$x"}}
	merge := bson.E{Key: "merge", Value: "function(a, b) { return a + b }"}
	acc := func(fields ...bson.E) bson.D { return bson.D{{Key: "$accumulator", Value: bson.D(fields)}} }
	checkOK(t, group(acc(init, accumulate, args, merge))) // lang may be left out
	for _, tc := range []struct {
		what string
		acc  any
		code int32
	}{
		{"not an object", bson.D{{Key: "$accumulator", Value: "x"}}, 4544703},
		{"init from a field", acc(bson.E{Key: "init", Value: "$x"}, accumulate, args, merge), 4544701},
		{"a number init", acc(bson.E{Key: "init", Value: 1}, accumulate, args, merge), 4544702},
		{"lang not a string", acc(init, accumulate, args, merge, bson.E{Key: "lang", Value: 1}), 4544704},
		{"another lang", acc(init, accumulate, args, merge, bson.E{Key: "lang", Value: "py"}), 4544705},
		{"an unknown field", acc(init, accumulate, args, merge, bson.E{Key: "frob", Value: 1}), 4544706},
		{"no init", acc(accumulate, args, merge), 4544707},
		{"no accumulate", acc(init, args, merge), 4544708},
		{"no merge", acc(init, accumulate, args), 4544709},
		{"no accumulateArgs", acc(init, accumulate, merge), 4544710},
		{"initArgs that are no array", acc(init, bson.E{Key: "initArgs", Value: "$name"}, accumulate, args, merge), 4544711},
		{"accumulateArgs that are no array", acc(init, accumulate, bson.E{Key: "accumulateArgs", Value: "$x"}, merge), 4544712},
	} {
		checkError(t, group(tc.acc), tc.code, "Location"+itoa(tc.code))
	}
	if msg := checkError(t, group(acc(init, bson.E{Key: "accumulate", Value: "function() { throw new Error('no') }"}, args, merge)), 139, "JSInterpreterFailure"); !strings.Contains(msg, "Error: no") {
		t.Errorf("a throwing accumulate: %q", msg)
	}
}
