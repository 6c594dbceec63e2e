package mongopool_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
)

// The rules asserted here are the causal consistency specification's
// (../shared/spec/causal-consistency.md, its test plan's cases 1 to 6 and
// "Causally consistent read and write commands") and the sessions
// specification's "Gossipping the cluster time".

// started returns the commands of the CommandStarted events, by name.
func started(events []mongopool.CommandEvent, name string) []bson.Raw {
	var out []bson.Raw
	for _, e := range named(events, name) {
		if e.Type == mongopool.CommandStarted {
			out = append(out, e.Command)
		}
	}
	return out
}

// succeeded returns the replies of the CommandSucceeded events, by name.
func succeeded(events []mongopool.CommandEvent, name string) []bson.Raw {
	var out []bson.Raw
	for _, e := range named(events, name) {
		if e.Type == mongopool.CommandSucceeded {
			out = append(out, e.Reply)
		}
	}
	return out
}

func timestampOf(t *testing.T, v bson.RawValue) bson.Timestamp {
	t.Helper()
	ts, i, ok := v.TimestampOK()
	if !ok {
		t.Fatalf("%v is not a timestamp", v)
	}
	return bson.Timestamp{T: ts, I: i}
}

func TestCausalConsistency(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	s := startSession(t, c)
	if _, ok := s.OperationTime(); ok {
		t.Error("a new session has an operation time")
	}
	// The first read has no afterClusterTime; its reply's operationTime
	// becomes the session's.
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	events := log.takeAll(t, c)
	if rc := started(events, "find")[0].Lookup("readConcern"); rc.Type != 0 {
		t.Errorf("the first read has a readConcern: %v", rc)
	}
	op, ok := s.OperationTime()
	if want := timestampOf(t, succeeded(events, "find")[0].Lookup("operationTime")); !ok || op != want {
		t.Errorf("operation time %v, %v; want the reply's %v", op, ok, want)
	}
	// A write: afterClusterTime, as every command that takes a read
	// concern; an error's operationTime counts too.
	if _, err := c.Write(ctx, "db", insertOf(1), mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, "db", insertOf(1), mongopool.WithSession(s)); err == nil {
		t.Fatal("a duplicate key succeeded")
	}
	events = log.takeAll(t, c)
	inserts := started(events, "insert")
	if got := timestampOf(t, inserts[0].Lookup("readConcern", "afterClusterTime")); got != op {
		t.Errorf("the write's afterClusterTime %v, want %v", got, op)
	}
	afterDup := timestampOf(t, succeeded(events, "insert")[1].Lookup("operationTime"))
	// A read with its own read concern level keeps it, with
	// afterClusterTime added.
	find := bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}}
	if _, err := c.Read(ctx, "db", find, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	rc := started(log.takeAll(t, c), "find")[0].Lookup("readConcern").Document()
	if rc.Lookup("level").StringValue() != "majority" || timestampOf(t, rc.Lookup("afterClusterTime")) != afterDup {
		t.Errorf("readConcern %s; want level majority and afterClusterTime %v (the failed insert's)", rc, afterDup)
	}
	// RunCommand adds none, as the specification says.
	if _, err := c.RunCommand(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if rc := started(log.takeAll(t, c), "count")[0].Lookup("readConcern"); rc.Type != 0 {
		t.Errorf("RunCommand got a readConcern: %v", rc)
	}
	// The first command of a transaction carries afterClusterTime with the
	// transaction's read concern; the others carry none.
	if err := s.StartTransaction(&mongopool.TransactionOptions{ReadConcern: "snapshot"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	finds := started(log.takeAll(t, c), "find")
	if rc := finds[0].Lookup("readConcern").Document(); rc.Lookup("level").StringValue() != "snapshot" || rc.Lookup("afterClusterTime").Type != bson.TypeTimestamp {
		t.Errorf("the transaction's first command: readConcern %s", rc)
	}
	if rc := finds[1].Lookup("readConcern"); rc.Type != 0 {
		t.Errorf("the transaction's second command has a readConcern: %v", rc)
	}

	// A session that is not causally consistent sends no afterClusterTime.
	plain, err := c.StartSession(mongopool.WithCausalConsistency(false))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.EndSession(ctx)
	for range 2 {
		if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(plain)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range started(log.takeAll(t, c), "find") {
		if rc := cmd.Lookup("readConcern"); rc.Type != 0 {
			t.Errorf("a session without causal consistency sent readConcern %v", rc)
		}
	}
	if _, ok := plain.OperationTime(); !ok {
		t.Error("a session without causal consistency keeps no operation time")
	}

	// AdvanceOperationTime moves the time on, never back.
	later := bson.Timestamp{T: op.T + 1000, I: 1}
	s.AdvanceOperationTime(later)
	s.AdvanceOperationTime(op)
	if got, _ := s.OperationTime(); got != later {
		t.Errorf("operation time %v after advancing to %v and back, want %v", got, op, later)
	}
}

// TestClusterTimeGossip checks that every command after the first reply
// carries the highest $clusterTime seen; that a session's later one (from
// AdvanceClusterTime) goes with its commands only; and that a standalone,
// which has none, gets none.
func TestClusterTimeGossip(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	for i := range 3 {
		if _, err := c.Write(ctx, "db", insertOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	events := log.takeAll(t, c)
	cmds, replies := started(events, "insert"), succeeded(events, "insert")
	for i := 1; i < 3; i++ {
		sent := timestampOf(t, cmds[i].Lookup("$clusterTime", "clusterTime"))
		if prev := timestampOf(t, replies[i-1].Lookup("$clusterTime", "clusterTime")); sent != prev {
			t.Errorf("insert %d sent $clusterTime %v, want the previous reply's %v", i, sent, prev)
		}
	}
	last := timestampOf(t, replies[2].Lookup("$clusterTime", "clusterTime"))

	s := startSession(t, c)
	ahead := bson.Timestamp{T: last.T + 100, I: 1}
	doc, err := bson.Marshal(bson.D{{Key: "clusterTime", Value: ahead}, {Key: "signature", Value: bson.D{
		{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceClusterTime(doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	finds := started(log.takeAll(t, c), "find")
	if got := timestampOf(t, finds[0].Lookup("$clusterTime", "clusterTime")); got != ahead {
		t.Errorf("the session's command sent %v, want its own later %v", got, ahead)
	}
	if got := timestampOf(t, finds[1].Lookup("$clusterTime", "clusterTime")); got == ahead {
		t.Error("another command sent the session's cluster time")
	}
	if err := s.AdvanceClusterTime(mustRaw(t, bson.D{{Key: "x", Value: 1}})); err == nil {
		t.Error("AdvanceClusterTime took a document without clusterTime")
	}

	sc := newClient(t, startServer(t).URI(), mongopool.WithCommandEventHandler(log.handler))
	ss := startSession(t, sc)
	for range 2 {
		if _, err := sc.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(ss)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range started(log.takeAll(t, sc), "find") {
		if cmd.Lookup("$clusterTime").Type != 0 || cmd.Lookup("readConcern").Type != 0 {
			t.Errorf("a standalone got %s", cmd)
		}
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startSession starts an explicit session of c, ended when the test ends.
func startSession(t *testing.T, c *mongopool.Client, opts ...mongopool.SessionOption) *mongopool.Session {
	t.Helper()
	s, err := c.StartSession(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.EndSession(context.Background()) })
	return s
}
