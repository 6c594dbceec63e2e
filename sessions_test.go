package mongopool_test

import (
	"bytes"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
)

// lsidOf returns the lsid of the first CommandStarted event of the command
// named name, nil if it has none.
func lsidOf(t *testing.T, events []mongopool.CommandEvent, name string) bson.Raw {
	t.Helper()
	for _, e := range named(events, name) {
		if e.Type == mongopool.CommandStarted {
			d, _ := e.Command.Lookup("lsid").DocumentOK()
			return d
		}
	}
	t.Fatalf("no %s command among %d events", name, len(events))
	return nil
}

// Every command the client runs where the deployment has sessions carries
// an implicit session (the sessions and run command specifications): from
// a pool, most recently used first, one operation at a time; not an
// unacknowledged write, and not a command that has its own lsid.
func TestImplicitSessions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		replicaSet bool
	}{{"replica set", true}, {"standalone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var uri string
			if tc.replicaSet {
				uri = startReplicaSet(t, 1).URI()
			} else {
				uri = startServer(t).URI()
			}
			var log commandLog
			c := newClient(t, uri, mongopool.WithCommandEventHandler(log.handler))
			ctx := ctx(t)
			insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}}
			if _, err := c.Write(ctx, "db", insert); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
				t.Fatal(err)
			}
			events := log.takeAll(t, c)
			first := lsidOf(t, events, "insert")
			if first == nil {
				t.Fatal("the insert has no lsid")
			}
			for _, name := range []string{"find", "ping"} {
				if got := lsidOf(t, events, name); !bytes.Equal(got, first) {
					t.Errorf("%s: lsid %v, want the pool's one session %v", name, got, first)
				}
			}
			_, err := named(events, "insert")[0].Command.LookupErr("txnNumber")
			if hasTxn := err == nil; hasTxn != tc.replicaSet {
				t.Errorf("the insert has a txnNumber: %v, want %v (a retryable write where the deployment has them)", hasTxn, tc.replicaSet)
			}

			// An unacknowledged write has none; a command's own lsid is
			// kept.
			w0 := append(insert, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}})
			if _, err := c.Write(ctx, "db", w0); err != nil {
				t.Fatal(err)
			}
			own := bson.D{{Key: "id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: make([]byte, 16)}}}
			if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "lsid", Value: own}}); err != nil {
				t.Fatal(err)
			}
			events = log.takeAll(t, c)
			if got := lsidOf(t, events, "insert"); got != nil {
				t.Errorf("an unacknowledged insert with lsid %v", got)
			}
			ownRaw, _ := bson.Marshal(own)
			if got := lsidOf(t, events, "find"); !bytes.Equal(got, ownRaw) {
				t.Errorf("a find with its own lsid sent with %v", got)
			}
		})
	}
}

// A cursor keeps its session for its getMores and its killCursors, and
// gives it back when closed; a network error makes a session dirty: the
// pool lets it go.
func TestCursorSessionAndDirtySessions(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	var log commandLog
	c := newClient(t, srv.URI()+"?replicaSet=rs&retryReads=false", mongopool.WithCommandEventHandler(log.handler))
	insertN(t, c, 5)
	ctx := ctx(t)
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile another operation takes another session.
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if !cur.Next(ctx) {
			t.Fatal(cur.Err())
		}
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events := log.takeAll(t, c)
	lsid := lsidOf(t, events, "find")
	for _, name := range []string{"getMore", "killCursors"} {
		for _, e := range named(events, name) {
			if got, _ := e.Command.Lookup("lsid").DocumentOK(); e.Type == mongopool.CommandStarted && !bytes.Equal(got, lsid) {
				t.Errorf("%s with lsid %v, want the find's %v", name, got, lsid)
			}
		}
	}
	if ping := lsidOf(t, events, "ping"); bytes.Equal(ping, lsid) {
		t.Error("the ping during the cursor's life used the cursor's session")
	}
	// Given back: the next operation takes it (the most recently used).
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if got := lsidOf(t, log.takeAll(t, c), "count"); !bytes.Equal(got, lsid) {
		t.Errorf("after the cursor's Close, count used %v, want the cursor's session %v", got, lsid)
	}
	// A network error: the session is not used again.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err == nil {
		t.Fatal("a count whose connection was closed succeeded")
	}
	dirty := lsidOf(t, log.takeAll(t, c), "count")
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if got := lsidOf(t, log.takeAll(t, c), "count"); bytes.Equal(got, dirty) {
		t.Errorf("the session of a network error was used again: %v", got)
	}
}

// An explicit session's commands all carry its lsid, which no implicit
// session shares while it is open; its retryable writes number their
// transactions in order; EndSession gives its server session back to the
// pool; an ended session refuses commands.
func TestExplicitSession(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	in := mongopool.WithSession(sess)
	insert := func(id int, opts ...mongopool.CommandOption) {
		t.Helper()
		if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, in)
	insert(2) // implicit, meanwhile
	insert(3, in)
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}, in)
	if err != nil {
		t.Fatal(err)
	}
	if docs, err := cur.All(ctx); err != nil || len(docs) != 3 {
		t.Fatalf("All: %d, %v", len(docs), err)
	}
	events := log.takeAll(t, c)
	var ids []bson.Raw
	var txns []int64
	for _, e := range events {
		if e.Type != mongopool.CommandStarted {
			continue
		}
		id, _ := e.Command.Lookup("lsid").DocumentOK()
		ids = append(ids, id)
		if e.Name == "insert" {
			n, _ := e.Command.Lookup("txnNumber").AsInt64OK()
			txns = append(txns, n)
		}
	}
	// insert, insert (implicit), insert, find, getMore, getMore (the third
	// document ends the cursor at its batch of one).
	if len(ids) < 5 {
		t.Fatalf("%d commands, want 5 or more", len(ids))
	}
	for i, id := range ids {
		if i == 1 {
			if bytes.Equal(id, ids[0]) {
				t.Errorf("the implicit insert used the open explicit session %v", id)
			}
			continue
		}
		if !bytes.Equal(id, ids[0]) {
			t.Errorf("command %d (%s) with lsid %v, want the session's %v", i, events[i].Name, id, ids[0])
		}
	}
	if txns[0] != 1 || txns[2] != 2 {
		t.Errorf("txnNumbers %v: want 1, then 2 for the session's writes", txns)
	}
	if !bytes.Equal(sess.ID(), ids[0]) {
		t.Errorf("ID %v, want %v", sess.ID(), ids[0])
	}
	sess.EndSession(ctx)
	sess.EndSession(ctx) // twice does nothing
	insert(4)
	if got := lsidOf(t, log.takeAll(t, c), "insert"); !bytes.Equal(got, ids[0]) {
		t.Errorf("after EndSession, an implicit insert used %v, want the ended session's server session %v (most recently used)", got, ids[0])
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, in); !errors.Is(err, mongopool.ErrSessionEnded) {
		t.Errorf("a command in an ended session: %v, want ErrSessionEnded", err)
	}
	other := newClient(t, rs.URI())
	sess2, _ := c.StartSession()
	defer sess2.EndSession(ctx)
	if _, err := other.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithSession(sess2)); err == nil {
		t.Error("a session of another client was accepted")
	}
}

// A session is dirty once a network error met one of its commands, and its
// server session is then not used again after EndSession.
func TestExplicitSessionDirty(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI()+"&retryReads=false", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	in := mongopool.WithSession(sess)
	count := bson.D{{Key: "count", Value: "c"}}
	if _, err := c.Read(ctx, "db", count, in); err != nil {
		t.Fatal(err)
	}
	if sess.Dirty() {
		t.Fatal("dirty after a command that succeeded")
	}
	if err := rs.Members()[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, ErrorCode: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", count, in); err == nil {
		t.Fatal("a count the fail point failed succeeded")
	}
	if sess.Dirty() {
		t.Fatal("dirty after a server's error")
	}
	if err := rs.Members()[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", count, in); err == nil {
		t.Fatal("a count whose connection was closed succeeded")
	}
	if !sess.Dirty() {
		t.Fatal("not dirty after a network error")
	}
	lsid := sess.ID()
	sess.EndSession(ctx)
	log.takeAll(t, c)
	if _, err := c.Read(ctx, "db", count); err != nil {
		t.Fatal(err)
	}
	if got := lsidOf(t, log.takeAll(t, c), "count"); bytes.Equal(got, lsid) {
		t.Errorf("the dirty session's server session %v was used again", got)
	}
}
