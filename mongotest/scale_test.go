package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestManyDocuments runs statements one by one over a few thousand
// documents and checks, through Stats.DocumentsExamined, that a query on
// _id examines one document rather than scan the collection: the cost of a
// batch of such statements grows with the batch, not with its square.
func TestManyDocuments(t *testing.T) {
	const n = 5000
	srv := start(t)
	r := dialRaw(t, srv)
	docs := make(bson.A, n)
	for i := range n {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}}
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: docs})))
	examined := func() int64 { return srv.Stats().DocumentsExamined }

	before := examined()
	updates := make(bson.A, n)
	for i := range n {
		updates[i] = bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: i}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "k", Value: 1}}}}}}
	}
	reply := r.run(cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: updates}))
	checkOK(t, reply)
	if m, _ := reply.Lookup("nModified").AsInt64OK(); m != n {
		t.Fatalf("update: %s", reply)
	}
	if d := examined() - before; d != n {
		t.Errorf("%d updates by _id examined %d documents, want %d", n, d, n)
	}

	if got := findIDs(t, r, "c", bson.E{Key: "sort", Value: bson.D{{Key: "k", Value: -1}}}, bson.E{Key: "limit", Value: 3}); got != "4999 4998 4997" {
		t.Errorf("the top 3 by k: %s", got)
	}
	before = examined()
	reply = r.run(cmd("x", bson.E{Key: "count", Value: "c"}, bson.E{Key: "query", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$gt", Value: 4000}}}}}))
	if c, _ := reply.Lookup("n").AsInt64OK(); c != 1000 {
		t.Errorf("count k > 4000: %s", reply)
	}
	if d := examined() - before; d != n {
		t.Errorf("a count on k examined %d documents, want the %d of the collection", d, n)
	}

	evens := make(bson.A, 0, n/2)
	for i := 0; i < n; i += 2 {
		evens = append(evens, int64(i))
	}
	reply = r.run(cmd("x", bson.E{Key: "count", Value: "c"}, bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: evens}}}}}))
	if c, _ := reply.Lookup("n").AsInt64OK(); c != n/2 {
		t.Errorf("count of _id $in the %d even numbers: %s", n/2, reply)
	}

	before = examined()
	deletes := make(bson.A, n)
	for i := range n {
		deletes[i] = bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: n - 1 - i}}}, {Key: "limit", Value: 1}}
	}
	reply = r.run(cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: deletes}))
	if c, _ := reply.Lookup("n").AsInt64OK(); c != n {
		t.Fatalf("delete: %s", reply)
	}
	if d := examined() - before; d != n {
		t.Errorf("%d deletes by _id examined %d documents, want %d", n, d, n)
	}
}
