package mongopool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// insertN inserts documents {_id: 0} to {_id: n-1} into db.c.
func insertN(t *testing.T, c *mongopool.Client, n int) {
	t.Helper()
	docs := make(bson.A, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := c.Write(ctx(t), "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}); err != nil {
		t.Fatal(err)
	}
}

// A cursor hands out the documents of every batch, in order, and its
// getMores go to the server that created it: with two secondaries to choose
// from, a read preference's selection would pick either.
func TestCursorGetMoreOnItsServer(t *testing.T) {
	rs := startReplicaSet(t, 3)
	var log commandLog
	c := newClient(t, rs.URI()+"&readPreference=secondary", mongopool.WithCommandEventHandler(log.handler))
	waitTopology(t, c, "a primary and two secondaries", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 2}))
	insertN(t, c, 10)
	ctx := ctx(t)
	for round := range 4 {
		cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "batchSize", Value: 3}},
			mongopool.WithBatchSize(3))
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		for cur.Next(ctx) {
			got = append(got, cur.Current().Lookup("_id").Int32())
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 || got[0] != 0 || got[9] != 9 {
			t.Fatalf("round %d: documents %v, want 0 to 9", round, got)
		}
		if cur.ID() != 0 {
			t.Errorf("an exhausted cursor has id %d", cur.ID())
		}
		events := log.takeAll(t, c)
		var where string
		for _, e := range named(events, "find") {
			where = e.Address
		}
		var getMores []string
		for _, e := range named(events, "getMore") {
			if e.Type == mongopool.CommandStarted {
				getMores = append(getMores, e.Address)
				if n, _ := e.Command.Lookup("batchSize").AsInt64OK(); n != 3 {
					t.Errorf("getMore without the batch size: %s", e.Command)
				}
			}
		}
		if len(getMores) != 3 {
			t.Fatalf("round %d: %d getMores, want 3 (batches of 3, 3, 3, 1)", round, len(getMores))
		}
		for _, a := range getMores {
			if a != where {
				t.Fatalf("round %d: the find ran on %s, a getMore on %s", round, where, a)
			}
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Closing a cursor before its end kills it on its server; Next then ends,
// and All reads the rest of an open one and closes it.
func TestCursorCloseAndAll(t *testing.T) {
	srv := startServer(t)
	var log commandLog
	c := newClient(t, srv.URI(), mongopool.WithCommandEventHandler(log.handler))
	insertN(t, c, 5)
	ctx := ctx(t)
	find := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}}
	cur, err := c.Cursor(ctx, "db", find)
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(ctx) || cur.ID() == 0 {
		t.Fatalf("the first document: %v, cursor %d", cur.Err(), cur.ID())
	}
	id := cur.ID()
	log.take(t, c, "")
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.Close(ctx); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	kills := log.take(t, c, "killCursors")
	if len(kills) != 2 || kills[1].Type != mongopool.CommandSucceeded {
		t.Fatalf("killCursors events %+v, want one, succeeded", kills)
	}
	if ids, _ := kills[0].Command.Lookup("cursors").Array().Values(); len(ids) != 1 || ids[0].Int64() != id {
		t.Errorf("killCursors %s, want cursor %d", kills[0].Command, id)
	}
	if cur.Next(ctx) || !errors.Is(cur.Err(), mongopool.ErrCursorClosed) {
		t.Errorf("Next after Close: %v", cur.Err())
	}
	cur, err = c.Cursor(ctx, "db", find, mongopool.WithMaxAwaitTime(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := cur.All(ctx)
	if err != nil || len(docs) != 5 {
		t.Fatalf("All: %d documents, %v", len(docs), err)
	}
	events := log.takeAll(t, c)
	if n := len(named(events, "killCursors")); n != 0 {
		t.Errorf("an exhausted cursor was killed (%d events)", n)
	}
	for _, e := range named(events, "getMore") {
		if ms, _ := e.Command.Lookup("maxTimeMS").AsInt64OK(); e.Type == mongopool.CommandStarted && ms != 250 {
			t.Errorf("getMore with maxAwaitTime 250ms: %s", e.Command)
		}
	}
	// A command that returns no cursor is an error that says so.
	if _, err := c.Cursor(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err == nil {
		t.Error("a cursor of count")
	}
	// A canceled context ends Next with its error.
	cur, err = c.Cursor(ctx, "db", find)
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for cur.Next(canceled) {
	}
	if !errors.Is(cur.Err(), context.Canceled) {
		t.Errorf("Next with a canceled context: %v", cur.Err())
	}
	cur.Close(ctx)
}

// Behind a load balancer a cursor keeps the connection that created it:
// its getMores and its killCursors go over it, and Close gives it back.
func TestCursorPinsItsLoadBalancedConnection(t *testing.T) {
	s := server(t, mongotest.WithLoadBalanced(bson.NewObjectID()))
	var log commandLog
	c := newClient(t, s.URI()+"?loadBalanced=true", mongopool.WithCommandEventHandler(log.handler))
	insertN(t, c, 6)
	ctx := ctx(t)
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}}, mongopool.WithBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	// Another operation meanwhile takes another connection.
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if !cur.Next(ctx) {
			t.Fatal(cur.Err())
		}
	}
	if st := c.Pools()[0].Stats(); st.InUse != 1 {
		t.Errorf("%d connections in use with an open cursor, want 1", st.InUse)
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events := log.takeAll(t, c)
	conns := map[string][]int64{}
	for _, e := range events {
		if e.Type == mongopool.CommandStarted {
			conns[e.Name] = append(conns[e.Name], e.ConnectionID)
		}
	}
	pinned := conns["find"][0]
	if len(conns["getMore"]) != 1 || conns["getMore"][0] != pinned || len(conns["killCursors"]) != 1 || conns["killCursors"][0] != pinned {
		t.Errorf("find on connection %d, getMore on %v, killCursors on %v; want all on it", pinned, conns["getMore"], conns["killCursors"])
	}
	if conns["count"][0] == pinned {
		t.Errorf("the count ran on the cursor's connection %d", pinned)
	}
	if st := c.Pools()[0].Stats(); st.InUse != 0 {
		t.Errorf("%d connections in use after Close, want 0", st.InUse)
	}
}

// A find's limit caps what the getMores ask for; TryNext runs one getMore at
// most, and reports the end like Next.
func TestCursorLimitAndTryNext(t *testing.T) {
	srv := startServer(t)
	var log commandLog
	c := newClient(t, srv.URI(), mongopool.WithCommandEventHandler(log.handler))
	insertN(t, c, 10)
	ctx := ctx(t)
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "limit", Value: 5}, {Key: "batchSize", Value: 2}},
		mongopool.WithBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := cur.All(ctx)
	if err != nil || len(docs) != 5 {
		t.Fatalf("All of a find with limit 5: %d documents, %v", len(docs), err)
	}
	var sizes []int64
	for _, e := range log.take(t, c, "getMore") {
		if e.Type == mongopool.CommandStarted {
			n, _ := e.Command.Lookup("batchSize").AsInt64OK()
			sizes = append(sizes, n)
		}
	}
	if len(sizes) != 2 || sizes[0] != 2 || sizes[1] != 1 {
		t.Errorf("getMore batch sizes %v, want [2 1]: no more than the limit leaves", sizes)
	}

	cur, err = c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}, mongopool.WithBatchSize(4))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	n := 0
	for cur.TryNext(ctx) {
		n++
	}
	if n != 10 || cur.Err() != nil || cur.ID() != 0 {
		t.Errorf("TryNext gave %d documents, then %v with cursor %d; want 10, then the end", n, cur.Err(), cur.ID())
	}
	if got := len(named(log.takeAll(t, c), "getMore")); got != 2*3 {
		t.Errorf("%d getMore events, want 6: three getMores of up to 4 after the first batch of 1", got)
	}
}

// A getMore that fails ends the cursor: Next reports the error, and the
// connection a load-balanced cursor kept goes back to the pool at once.
func TestCursorErrorEndsIt(t *testing.T) {
	s := server(t, mongotest.WithLoadBalanced(bson.NewObjectID()))
	c := newClient(t, s.URI()+"?loadBalanced=true")
	insertN(t, c, 4)
	ctx := ctx(t)
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFailPoint(mongotest.FailPoint{Commands: []string{"getMore"}, Times: 1, ErrorCode: 43}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for cur.Next(ctx) {
		n++
	}
	var ce *wire.CommandError
	if n != 1 || !errors.As(cur.Err(), &ce) || ce.Code != 43 {
		t.Fatalf("%d documents, then %v; want 1, then the getMore's CursorNotFound", n, cur.Err())
	}
	if st := c.Pools()[0].Stats(); st.InUse != 0 {
		t.Errorf("%d connections in use after the cursor's error, want 0", st.InUse)
	}
	if cur.Next(ctx) || cur.ID() != 0 {
		t.Error("the cursor went on after its error")
	}
	if err := cur.Close(ctx); err != nil {
		t.Errorf("Close after the error: %v", err)
	}
}

// WithGetMoreComment gives a cursor's getMores a comment (the CRUD
// specification's find and aggregate comment, which goes on their getMores
// too; runCursorCommand's getMore comment); without it they have none.
func TestCursorGetMoreComment(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	var log commandLog
	c := newClient(t, srv.URI()+"?replicaSet=rs", mongopool.WithCommandEventHandler(log.handler))
	insertN(t, c, 3)
	ctx := ctx(t)
	find := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "comment", Value: bson.D{{Key: "k", Value: "v"}}}}
	for _, opts := range [][]mongopool.CommandOption{nil, {mongopool.WithGetMoreComment(bson.D{{Key: "k", Value: "v"}})}} {
		cur, err := c.Cursor(ctx, "db", find, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if docs, err := cur.All(ctx); err != nil || len(docs) != 3 {
			t.Fatalf("All: %d documents, %v", len(docs), err)
		}
		getMores := 0
		for _, e := range log.take(t, c, "getMore") {
			if e.Type != mongopool.CommandStarted {
				continue
			}
			getMores++
			v, err := e.Command.LookupErr("comment")
			switch {
			case len(opts) == 0 && err == nil:
				t.Errorf("without the option, a getMore with the comment %s", v)
			case len(opts) > 0 && (err != nil || v.Document().Lookup("k").StringValue() != "v"):
				t.Errorf("a getMore with the comment %v, want {k: v}", v)
			}
		}
		if getMores == 0 {
			t.Error("no getMore")
		}
	}
}
