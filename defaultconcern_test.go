package mongopool_test

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
)

// TestConnectionStringConcerns checks the read and write concern
// specification's rules for the connection string's w, journal,
// wTimeoutMS and readConcernLevel: writes and reads without their own
// concern take them, RunCommand does not, a command's own wins, a
// transaction inherits them, and w=0 makes writes unacknowledged (no
// session: the sessions specification).
func TestConnectionStringConcerns(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI()+"&w=majority&journal=true&wTimeoutMS=2500&readConcernLevel=majority", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	if _, err := c.Write(ctx, "db", insertOf(1)); err != nil {
		t.Fatal(err)
	}
	own := append(insertOf(2), bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}})
	if _, err := c.Write(ctx, "db", own); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCommand(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	events := log.takeAll(t, c)
	inserts := started(events, "insert")
	wc := inserts[0].Lookup("writeConcern").Document()
	if wc.Lookup("w").StringValue() != "majority" || !wc.Lookup("j").Boolean() || wc.Lookup("wtimeout").Int64() != 2500 {
		t.Errorf("a write's writeConcern %s; want {w: majority, j: true, wtimeout: 2500}", wc)
	}
	if w := inserts[1].Lookup("writeConcern", "w").Int32(); w != 1 {
		t.Errorf("a write with its own writeConcern sent w %d", w)
	}
	if lvl := started(events, "find")[0].Lookup("readConcern", "level").StringValue(); lvl != "majority" {
		t.Errorf("a read's readConcern level %q, want majority", lvl)
	}
	if cmd := started(events, "count")[0]; cmd.Lookup("readConcern").Type != 0 || cmd.Lookup("writeConcern").Type != 0 {
		t.Errorf("RunCommand got a concern: %s", cmd)
	}

	// A transaction takes them, on its first command and its commit.
	s := startSession(t, c)
	if err := s.WithTransaction(ctx, func(sctx context.Context) error {
		_, err := c.Write(sctx, "db", insertOf(3), mongopool.WithSession(s))
		return err
	}, nil); err != nil {
		t.Fatal(err)
	}
	events = log.takeAll(t, c)
	if cmd := started(events, "insert")[0]; cmd.Lookup("readConcern", "level").StringValue() != "majority" || cmd.Lookup("writeConcern").Type != 0 {
		t.Errorf("the transaction's first command: %s; want readConcern majority and no writeConcern", cmd)
	}
	if w := started(events, "commitTransaction")[0].Lookup("writeConcern", "w").StringValue(); w != "majority" {
		t.Errorf("the commit's w %q, want majority", w)
	}

	// w=0: unacknowledged, so no session and no retry.
	u := newClient(t, rs.URI()+"&w=0", mongopool.WithCommandEventHandler(log.handler))
	if _, err := u.Write(ctx, "db", insertOf(4)); err != nil {
		t.Fatal(err)
	}
	cmd := started(log.takeAll(t, u), "insert")[0]
	if cmd.Lookup("lsid").Type != 0 || cmd.Lookup("txnNumber").Type != 0 || cmd.Lookup("writeConcern", "w").Int32() != 0 {
		t.Errorf("a w=0 write: %s; want w 0, no lsid, no txnNumber", cmd)
	}
	// A transaction cannot be unacknowledged, the client's w=0 included.
	us := startSession(t, u)
	if err := us.StartTransaction(nil); !errors.Is(err, mongopool.ErrUnacknowledgedTransaction) {
		t.Errorf("StartTransaction with the client's w=0: %v", err)
	}
}
