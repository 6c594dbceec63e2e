package mongotest_test

import (
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCommandErrors checks MongoDB's error shape: ok 0, errmsg, code and
// codeName.
func TestCommandErrors(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	for _, tc := range []struct {
		name     string
		cmd      bson.D
		code     int32
		codeName string
		msg      string
	}{
		{"unknown command", cmd("admin", bson.E{Key: "frobnicate", Value: 1}), 59, "CommandNotFound", "no such command: 'frobnicate'"},
		{"wrong case", cmd("admin", bson.E{Key: "PING", Value: 1}), 59, "CommandNotFound", "no such command: 'PING'"},
		{"no $db", bson.D{{Key: "ping", Value: 1}}, 40571, "Location40571", "OP_MSG requests require a $db argument"},
		{"bad collection", cmd("x", bson.E{Key: "find", Value: 1}), 73, "InvalidNamespace", ""},
		{"negative batchSize", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "batchSize", Value: -1}), 2, "BadValue", ""},
		{"unknown operator", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$frob", Value: 1}}}}}), 2, "BadValue", "unknown operator: $frob"},
		{"operator not implemented", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "x"}}}}}), 2, "BadValue", "mongotest does not implement the query operator $text"},
		{"unknown find option", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "projecton", Value: bson.D{}}), 40415, "IDLUnknownField", "BSON field 'find.projecton' is an unknown field."},
		{"unknown update statement field", cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}, {Key: "mutli", Value: true}}}}), 40415, "IDLUnknownField", "BSON field 'update.updates.mutli' is an unknown field."},
		{"aggregate without cursor", cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "pipeline", Value: bson.A{}}), 9, "FailedToParse", "The 'cursor' option is required, except for aggregate with the explain argument"},
		{"stage with two fields", cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}}, bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}, {Key: "$limit", Value: 1}}}}), 40323, "Location40323", "A pipeline stage specification object must contain exactly one field."},
		{"stage not implemented", cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}}, bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{}}}}}), 2, "BadValue", "mongotest does not implement the $lookup stage"},
		{"expression not implemented", cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}}, bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$add", Value: bson.A{1, 2}}}}}}}}}), 2, "BadValue", "mongotest does not implement the expression operator $add"},
		{"unknown accumulator", cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}}, bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{{Key: "$frob", Value: 1}}}}}}}}), 15952, "Location15952", "unknown group operator '$frob'"},
		{"collation", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}), 2, "BadValue", ""},
		{"deep nesting", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: nested(250)}), 15, "Overflow", "BSONObj exceeded maximum nested object depth: 200"},
		{"huge $in", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: make(bson.A, 100001)}}}}}), 2, "BadValue", "$in holds 100001 values, more than the 100000 that mongotest takes"},
		{"long path", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: strings.Repeat("a.", 200) + "a", Value: 1}}}), 2, "BadValue", ""},
		{"create with a validator", cmd("x", bson.E{Key: "create", Value: "c"}, bson.E{Key: "validator", Value: bson.D{{Key: "a", Value: 1}}}), 2, "BadValue", "mongotest does not implement the collection option validator"},
		{"deep query", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: nestedNot(150)}), 2, "BadValue", "exceeded maximum query tree depth of 100"},
		{"unknown cursor", cmd("x", bson.E{Key: "getMore", Value: int64(12345)}, bson.E{Key: "collection", Value: "c"}), 43, "CursorNotFound", "cursor id 12345 not found"},
		{"getMore id type", cmd("x", bson.E{Key: "getMore", Value: int32(1)}, bson.E{Key: "collection", Value: "c"}), 14, "TypeMismatch", ""},
		{"listDatabases not on admin", cmd("x", bson.E{Key: "listDatabases", Value: 1}), 13, "Unauthorized", ""},
		{"empty insert", cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{}}), 16, "InvalidLength", ""},
		{"empty delete", cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: bson.A{}}), 16, "InvalidLength", "Write batch sizes must be between 1 and 100000. Got 0 operations."},
		{"negative skip in count", cmd("x", bson.E{Key: "count", Value: "c"}, bson.E{Key: "skip", Value: -1}), 2, "BadValue", "skip value must be non-negative, but received: -1"},
		{"count query not a document", cmd("x", bson.E{Key: "count", Value: "c"}, bson.E{Key: "query", Value: 1}), 14, "TypeMismatch", ""},
		{"unknown mechanism", cmd("admin", bson.E{Key: "saslStart", Value: 1}, bson.E{Key: "mechanism", Value: "GSSAPI"}, bson.E{Key: "payload", Value: bson.Binary{}}), 334, "MechanismUnavailable", ""},
		{"saslContinue alone", cmd("admin", bson.E{Key: "saslContinue", Value: 1}, bson.E{Key: "conversationId", Value: 1}, bson.E{Key: "payload", Value: bson.Binary{}}), 17, "ProtocolError", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := checkError(t, r.run(tc.cmd), tc.code, tc.codeName)
			if tc.msg != "" && msg != tc.msg {
				t.Errorf("errmsg %q, want %q", msg, tc.msg)
			}
		})
	}
}

// nested returns a filter {a: {a: ... {a: 1}}} n documents deep.
func nested(n int) bson.D {
	d := bson.D{{Key: "a", Value: 1}}
	for range n {
		d = bson.D{{Key: "a", Value: d}}
	}
	return d
}

// nestedNot returns a filter {a: {$not: {$not: ... {$gt: 1}}}} with n
// $not.
func nestedNot(n int) bson.D {
	d := bson.D{{Key: "$gt", Value: 1}}
	for range n {
		d = bson.D{{Key: "$not", Value: d}}
	}
	return bson.D{{Key: "a", Value: d}}
}

// TestDocumentSequences inserts through an OP_MSG document sequence, as
// drivers do, and checks duplicate _id handling.
func TestDocumentSequences(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	docs := func(ids ...int) []bson.Raw {
		var out []bson.Raw
		for _, id := range ids {
			out = append(out, marshal(t, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: id * 10}}))
		}
		return out
	}
	insert := func(ordered bool, ids ...int) bson.Raw {
		_, reply := r.roundTrip(&wire.Msg{
			Body:      marshal(t, cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "ordered", Value: ordered})),
			Sequences: []wire.Sequence{{Identifier: "documents", Documents: docs(ids...)}},
		}, nil)
		return reply
	}
	reply := insert(true, 1, 2, 3)
	checkOK(t, reply)
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 3 {
		t.Errorf("insert of 3 documents: %s", reply)
	}

	// Ordered: stops at the duplicate. Unordered: goes on.
	reply = insert(true, 4, 2, 5)
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("ordered insert with a duplicate: %s, want n 1", reply)
	}
	if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code != 11000 {
		t.Errorf("duplicate _id: %s, want a write error with code 11000", reply)
	}
	if idx, _ := reply.Lookup("writeErrors", "0", "index").AsInt64OK(); idx != 1 {
		t.Errorf("duplicate _id: %s, want the write error at index 1", reply)
	}
	reply = insert(false, 6, 1.0, 7) // 1.0 equals the _id 1
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 2 {
		t.Errorf("unordered insert with a duplicate: %s, want n 2", reply)
	}

	// The body array works too, but not both at once.
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "v", Value: 80}}}})))
	_, reply = r.roundTrip(&wire.Msg{
		Body:      marshal(t, cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{}})),
		Sequences: []wire.Sequence{{Identifier: "documents", Documents: docs(9)}},
	}, nil)
	checkError(t, reply, 2, "BadValue")

	reply = r.run(cmd("x", bson.E{Key: "find", Value: "c"}))
	var res struct {
		Cursor struct {
			FirstBatch []bson.M `bson:"firstBatch"`
			ID         int64    `bson:"id"`
			NS         string   `bson:"ns"`
		} `bson:"cursor"`
	}
	if err := bson.Unmarshal(reply, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Cursor.FirstBatch) != 7 || res.Cursor.ID != 0 || res.Cursor.NS != "x.c" {
		t.Errorf("find: %s, want the 7 documents, cursor id 0, ns x.c", reply)
	}
	if _, ok := res.Cursor.FirstBatch[6]["_id"].(bson.ObjectID); !ok {
		t.Errorf("a document inserted without _id got %v", res.Cursor.FirstBatch[6]["_id"])
	}
}

// TestCursors checks find's batchSize, limit, skip and singleBatch, and
// getMore and killCursors.
func TestCursors(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	var docs bson.A
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "tags", Value: bson.A{"all", []string{"even", "odd"}[i%2]}}})
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: docs})))

	type batch struct {
		ids []int
		id  int64
	}
	read := func(reply bson.Raw, field string) batch {
		t.Helper()
		checkOK(t, reply)
		var b batch
		vals, _ := reply.Lookup("cursor", field).Array().Values()
		for _, v := range vals {
			b.ids = append(b.ids, int(v.Document().Lookup("_id").AsInt64()))
		}
		b.id = reply.Lookup("cursor", "id").Int64()
		return b
	}
	find := func(fields ...bson.E) batch {
		t.Helper()
		return read(r.run(cmd("x", append([]bson.E{{Key: "find", Value: "c"}}, fields...)...)), "firstBatch")
	}
	getMore := func(id int64, size int) batch {
		t.Helper()
		return read(r.run(cmd("x", bson.E{Key: "getMore", Value: id}, bson.E{Key: "collection", Value: "c"}, bson.E{Key: "batchSize", Value: size})), "nextBatch")
	}
	b := find(bson.E{Key: "batchSize", Value: 0})
	if len(b.ids) != 0 || b.id == 0 {
		t.Errorf("batchSize 0: %+v, want an empty batch and a cursor", b)
	}
	if b = getMore(b.id, 4); len(b.ids) != 4 || b.ids[0] != 0 || b.id == 0 {
		t.Errorf("getMore 4: %+v", b)
	}
	if b = getMore(b.id, 0); len(b.ids) != 6 || b.ids[5] != 9 || b.id != 0 {
		t.Errorf("getMore rest: %+v, want 6 documents and the cursor closed", b)
	}
	if b = find(bson.E{Key: "skip", Value: 2}, bson.E{Key: "limit", Value: 5}, bson.E{Key: "batchSize", Value: 3}); len(b.ids) != 3 || b.ids[0] != 2 || b.id == 0 {
		t.Errorf("skip 2, limit 5, batchSize 3: %+v", b)
	}
	if b = getMore(b.id, 10); len(b.ids) != 2 || b.ids[1] != 6 || b.id != 0 {
		t.Errorf("getMore within the limit: %+v, want 2 documents, cursor closed", b)
	}
	if b = find(bson.E{Key: "batchSize", Value: 2}, bson.E{Key: "singleBatch", Value: true}); len(b.ids) != 2 || b.id != 0 {
		t.Errorf("singleBatch: %+v", b)
	}
	if b = find(bson.E{Key: "batchSize", Value: 2}, bson.E{Key: "singleBatch", Value: 0.5}); len(b.ids) != 2 || b.id != 0 {
		t.Errorf("singleBatch 0.5, a number MongoDB takes as true: %+v", b)
	}
	if b = find(bson.E{Key: "skip", Value: 1}, bson.E{Key: "limit", Value: -3}); len(b.ids) != 3 || b.ids[0] != 1 || b.id != 0 {
		t.Errorf("skip 1, limit -3 (one batch of 3): %+v", b)
	}
	if b = find(bson.E{Key: "filter", Value: bson.D{{Key: "tags", Value: "odd"}}}); len(b.ids) != 5 || b.ids[0] != 1 {
		t.Errorf("filter on an array element: %+v", b)
	}
	if b = find(bson.E{Key: "filter", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: 3.0}}}}}); len(b.ids) != 1 || b.ids[0] != 3 {
		t.Errorf("filter {_id: {$eq: 3.0}}: %+v", b)
	}
	if b = find(bson.E{Key: "filter", Value: bson.D{{Key: "missing", Value: nil}}}); len(b.ids) != 10 {
		t.Errorf("filter {missing: null}: %+v", b)
	}

	b = find(bson.E{Key: "batchSize", Value: 1})
	checkError(t, r.run(cmd("x", bson.E{Key: "getMore", Value: b.id}, bson.E{Key: "collection", Value: "other"})), 13, "Unauthorized")
	reply := r.run(cmd("x", bson.E{Key: "killCursors", Value: "c"}, bson.E{Key: "cursors", Value: bson.A{b.id, int64(999)}}))
	checkOK(t, reply)
	if k, _ := reply.Lookup("cursorsKilled", "0").Int64OK(); k != b.id {
		t.Errorf("killCursors: %s", reply)
	}
	if nf, _ := reply.Lookup("cursorsNotFound", "0").Int64OK(); nf != 999 {
		t.Errorf("killCursors: %s", reply)
	}
	checkError(t, r.run(cmd("x", bson.E{Key: "getMore", Value: b.id}, bson.E{Key: "collection", Value: "c"})), 43, "CursorNotFound")
}

// TestCount checks count's query, skip and limit, which it reads as find
// does.
func TestCount(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	var docs bson.A
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "odd", Value: i%2 == 1}})
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: docs})))
	odd := bson.E{Key: "query", Value: bson.D{{Key: "odd", Value: true}}}
	for _, tc := range []struct {
		name   string
		fields []bson.E
		want   int64
	}{
		{"all", nil, 10},
		{"query", []bson.E{odd}, 5},
		{"skip", []bson.E{{Key: "skip", Value: 8}}, 2},
		{"skip past the end", []bson.E{{Key: "skip", Value: 20}}, 0},
		{"skip and limit", []bson.E{{Key: "skip", Value: 2}, {Key: "limit", Value: 3}}, 3},
		{"negative limit", []bson.E{{Key: "limit", Value: -4}}, 4},
		{"query, skip and a limit beyond", []bson.E{odd, {Key: "skip", Value: 1}, {Key: "limit", Value: 10}}, 4},
	} {
		reply := r.run(cmd("x", append([]bson.E{{Key: "count", Value: "c"}}, tc.fields...)...))
		checkOK(t, reply)
		if n, _ := reply.Lookup("n").AsInt64OK(); n != tc.want {
			t.Errorf("%s: %s, want n %d", tc.name, reply, tc.want)
		}
	}
	reply := r.run(cmd("x", bson.E{Key: "count", Value: "none"}))
	if n, ok := reply.Lookup("n").AsInt64OK(); !ok || n != 0 {
		t.Errorf("count of a collection that does not exist: %s, want n 0", reply)
	}
}

// An update statement's sort is an option of MongoDB 8.0: a server of an
// older version refuses it as an unknown field, as mongod 7.0 does.
func TestUpdateSortByVersion(t *testing.T) {
	update := cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}},
		{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}}}})
	old := dialRaw(t, start(t))
	checkOK(t, old.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	if msg := checkError(t, old.run(update), 40415, "IDLUnknownField"); msg != "BSON field 'update.updates.sort' is an unknown field." {
		t.Errorf("7.0: %q", msg)
	}
	recent := dialRaw(t, start(t, mongotest.WithWireVersions(0, 25)))
	checkOK(t, recent.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}})))
	reply := recent.run(update)
	checkOK(t, reply)
	if n := reply.Lookup("nModified").Int32(); n != 1 {
		t.Errorf("8.0: nModified %d, want 1", n)
	}
}

// An _id may not hold a '$'-prefixed field, at any depth, as mongod has it;
// a dotted one is fine.
func TestInsertDollarPrefixedID(t *testing.T) {
	r := dialRaw(t, start(t))
	insert := func(id any) bson.Raw {
		return r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}))
	}
	for _, id := range []any{bson.D{{Key: "$a", Value: 1}}, bson.D{{Key: "a", Value: bson.D{{Key: "$b", Value: 1}}}}} {
		reply := insert(id)
		we, ok := reply.Lookup("writeErrors", "0").DocumentOK()
		if !ok || we.Lookup("code").Int32() != 52 {
			t.Errorf("_id %v: %s, want a write error DollarPrefixedFieldName (52)", id, reply)
		}
	}
	checkOK(t, insert(bson.D{{Key: "a.b", Value: 1}}))
	if reply := insert(bson.D{{Key: "a.b", Value: 2}}); reply.Lookup("writeErrors").Type != 0 {
		t.Errorf("a dotted _id: %s", reply)
	}
}
