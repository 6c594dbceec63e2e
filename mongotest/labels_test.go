package mongotest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// lsid is a session id, as drivers send it.
func lsid(b byte) bson.D {
	return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: slices.Repeat([]byte{b}, 16)}}}
}

// labelsOf returns the errorLabels of a reply.
func labelsOf(t *testing.T, reply bson.Raw) []string {
	t.Helper()
	var r struct {
		Labels []string `bson:"errorLabels"`
	}
	if err := bson.Unmarshal(reply, &r); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	return r.Labels
}

// insertCmd is an insert of {_id: id} into x.c, with more fields (session
// fields).
func insertCmd(id int, more ...bson.E) bson.D {
	return cmd("x", append([]bson.E{
		{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
	}, more...)...)
}

func TestSessionFieldsOnStandalone(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	session := bson.E{Key: "lsid", Value: lsid(1)}
	txn := bson.E{Key: "txnNumber", Value: int64(1)}
	// The fail point would fail every insert, but mongod refuses the
	// session fields before it.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cmd      bson.D
		code     int32
		codeName string
		msg      string
	}{
		{"a retryable write", insertCmd(1, session, txn), 20, "IllegalOperation", "Transaction numbers are only allowed on a replica set member or mongos"},
		{"a transaction", insertCmd(1, session, txn, bson.E{Key: "autocommit", Value: false}, bson.E{Key: "startTransaction", Value: true}),
			20, "IllegalOperation", "Transaction numbers are only allowed on a replica set member or mongos"},
		{"txnNumber without lsid", insertCmd(1, txn), 72, "InvalidOptions", "Transaction number requires a session ID to also be specified"},
		{"autocommit without txnNumber", insertCmd(1, session, bson.E{Key: "autocommit", Value: false}), 72, "InvalidOptions", "'autocommit' field requires a transaction number to also be specified"},
		{"txnNumber of the wrong type", insertCmd(1, session, bson.E{Key: "txnNumber", Value: int32(1)}), 14, "TypeMismatch", "expected type 'long'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := r.run(tc.cmd)
			if msg := checkError(t, reply, tc.code, tc.codeName); msg != tc.msg && tc.code != 14 {
				t.Errorf("errmsg %q, want %q", msg, tc.msg)
			}
			if labels := labelsOf(t, reply); labels != nil {
				t.Errorf("labels %v, want none", labels)
			}
		})
	}
	if n := srv.Stats().FailCommandFired; n != 0 {
		t.Errorf("the fail point fired %d times; the session checks come first", n)
	}
	srv.ClearFailPoints()
	checkOK(t, r.run(insertCmd(1, session))) // a session without txnNumber is fine
}

func TestErrorLabels(t *testing.T) {
	session := bson.E{Key: "lsid", Value: lsid(2)}
	autocommit := bson.E{Key: "autocommit", Value: false}
	startTxn := bson.E{Key: "startTransaction", Value: true}
	wce := func(code int32) bson.D { return bson.D{{Key: "code", Value: code}, {Key: "errmsg", Value: "waiting"}} }
	txnNumber := int64(0)
	txn := func() bson.E { txnNumber++; return bson.E{Key: "txnNumber", Value: txnNumber} }
	rs := []mongotest.Option{mongotest.WithReplicaSet("rs0")}
	lb := []mongotest.Option{mongotest.WithLoadBalanced(bson.ObjectID{})}
	for _, tc := range []struct {
		name string
		opts []mongotest.Option
		fp   mongotest.FailPoint
		cmd  func() bson.D
		code int32 // 0: ok with a writeConcernError
		want []string
	}{
		{"retryable write, retriable code", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91},
			func() bson.D { return insertCmd(1, session, txn()) }, 91, []string{"RetryableWriteError"}},
		{"retryable write, NotWritablePrimary", rs, mongotest.FailPoint{Commands: []string{"update"}, ErrorCode: 10107},
			func() bson.D {
				return cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}}}}, session, txn())
			}, 10107, []string{"RetryableWriteError"}},
		{"not a retryable write", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91},
			func() bson.D { return insertCmd(1, session) }, 91, nil},
		{"a code that is not retriable", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 8},
			func() bson.D { return insertCmd(1, session, txn()) }, 8, nil},
		{"the fail point's empty labels", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91, ErrorLabels: []string{}},
			func() bson.D { return insertCmd(1, session, txn()) }, 91, nil},
		{"the fail point's labels", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91, ErrorLabels: []string{"Mine"}},
			func() bson.D { return insertCmd(1, session, txn()) }, 91, []string{"Mine"}},
		{"writeConcernError, retriable code", rs, mongotest.FailPoint{Commands: []string{"insert"}, WriteConcernError: wce(91)},
			func() bson.D { return insertCmd(10, session, txn()) }, 0, []string{"RetryableWriteError"}},
		{"writeConcernError, code not retriable", rs, mongotest.FailPoint{Commands: []string{"insert"}, WriteConcernError: wce(64)},
			func() bson.D { return insertCmd(11, session, txn()) }, 0, nil},
		{"transaction, transient code", rs, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 112},
			func() bson.D { return insertCmd(1, session, txn(), autocommit, startTxn) }, 112, []string{"TransientTransactionError"}},
		{"commitTransaction, retriable code", rs, mongotest.FailPoint{Commands: []string{"commitTransaction"}, ErrorCode: 189},
			func() bson.D {
				return cmd("admin", bson.E{Key: "commitTransaction", Value: 1}, session, bson.E{Key: "txnNumber", Value: txnNumber}, autocommit)
			}, 189, []string{"RetryableWriteError"}},
		{"change stream error", rs, mongotest.FailPoint{Commands: []string{"find"}, ErrorCode: 280},
			func() bson.D { return cmd("x", bson.E{Key: "find", Value: "c"}) }, 280, []string{"NonResumableChangeStreamError"}},
		{"mongos, retryable write", lb, mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 91},
			func() bson.D { return insertCmd(1, session, txn()) }, 91, nil},
		{"mongos, writeConcernError", lb, mongotest.FailPoint{Commands: []string{"insert"}, WriteConcernError: wce(91)},
			func() bson.D { return insertCmd(12, session, txn()) }, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, tc.opts...)
			r := dialRaw(t, srv)
			if srv.ServiceID() != (bson.ObjectID{}) {
				checkOK(t, r.run(cmd("admin", bson.E{Key: "hello", Value: 1}, bson.E{Key: "loadBalanced", Value: true})))
			}
			if err := srv.SetFailPoint(tc.fp); err != nil {
				t.Fatal(err)
			}
			reply := r.run(tc.cmd())
			if tc.code != 0 {
				checkError(t, reply, tc.code, reply.Lookup("codeName").StringValue())
			} else {
				checkOK(t, reply)
				if reply.Lookup("writeConcernError").Type == 0 {
					t.Fatalf("reply %s has no writeConcernError", reply)
				}
			}
			if got := labelsOf(t, reply); !slices.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v (reply %s)", got, tc.want, reply)
			}
		})
	}
}

func TestSessionChecksAfterFailPoint(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("rs0"))
	r := dialRaw(t, srv)
	session := bson.E{Key: "lsid", Value: lsid(3)}
	txn := bson.E{Key: "txnNumber", Value: int64(1)}
	msg := checkError(t, r.run(cmd("x", bson.E{Key: "find", Value: "c"}, session, txn)), 50768, "NotARetryableWriteCommand")
	if msg != "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and find is not a retryable write command." {
		t.Errorf("errmsg %q", msg)
	}
	// A command that may not run in a transaction is refused after the
	// fail point too (OperationNotSupportedInTransaction, 263).
	reply := r.run(cmd("x", bson.E{Key: "count", Value: "c"}, session, txn, bson.E{Key: "autocommit", Value: false}, bson.E{Key: "startTransaction", Value: true}))
	if msg := checkError(t, reply, 263, "OperationNotSupportedInTransaction"); msg != "Cannot run 'count' in a multi-document transaction." {
		t.Errorf("errmsg %q", msg)
	}
	reply = r.run(cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}, session, bson.E{Key: "txnNumber", Value: int64(2)}))
	if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code != 72 {
		t.Errorf("a retryable delete of many: %s, want write error 72", reply)
	}
}

func TestRetryableWriteRunsOnce(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("rs0"))
	r := dialRaw(t, srv)
	session := bson.E{Key: "lsid", Value: lsid(4)}
	n := func(reply bson.Raw) int64 {
		t.Helper()
		checkOK(t, reply)
		if reply.Lookup("writeErrors").Type != 0 {
			t.Errorf("reply %s has write errors", reply)
		}
		v, _ := reply.Lookup("n").AsInt64OK()
		return v
	}
	if got := n(r.run(insertCmd(1, session, bson.E{Key: "txnNumber", Value: int64(5)}))); got != 1 {
		t.Fatalf("the insert: n %d", got)
	}
	// The retry gets the first reply, rather than a duplicate key error.
	if got := n(r.run(insertCmd(1, session, bson.E{Key: "txnNumber", Value: int64(5)}))); got != 1 {
		t.Errorf("the retry: n %d, want the first reply's 1", got)
	}
	count := r.run(cmd("x", bson.E{Key: "count", Value: "c"}))
	if c, _ := count.Lookup("n").AsInt64OK(); c != 1 {
		t.Errorf("count after a write and its retry: %s, want 1", count)
	}
	msg := checkError(t, r.run(insertCmd(2, session, bson.E{Key: "txnNumber", Value: int64(4)})), 225, "TransactionTooOld")
	if msg == "" {
		t.Error("no errmsg")
	}
	// A new txnNumber runs again; so does a write of another session.
	reply := r.run(insertCmd(1, session, bson.E{Key: "txnNumber", Value: int64(6)}))
	if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code != 11000 {
		t.Errorf("a new write of the same _id: %s, want a duplicate key error", reply)
	}
	checkOK(t, r.run(cmd("admin", bson.E{Key: "endSessions", Value: bson.A{lsid(4)}})))
	if got := n(r.run(insertCmd(3, session, bson.E{Key: "txnNumber", Value: int64(1)}))); got != 1 {
		t.Errorf("after endSessions, txnNumber 1 starts again: n %d", got)
	}
}

// runErr is run for another goroutine than the test's: it returns an
// error rather than fail the test. Its reads and writes have a deadline.
func (r *rawConn) runErr(c bson.D) (bson.Raw, error) {
	body, err := bson.Marshal(c)
	if err != nil {
		return nil, err
	}
	b, err := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: body})
	if err != nil {
		return nil, err
	}
	r.nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := r.nc.Write(b); err != nil {
		return nil, err
	}
	raw, err := wire.ReadMessage(r.nc, 0)
	if err != nil {
		return nil, err
	}
	_, m, err := wire.DecodeReply(raw, 0)
	if err != nil {
		return nil, err
	}
	return m.Body, nil
}

// TestRetryableWriteConcurrentRetries sends one retryable write from
// several connections at once: it runs once, and every connection gets its
// reply.
func TestRetryableWriteConcurrentRetries(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("rs0"))
	const conns = 8
	rs := make([]*rawConn, conns)
	for i := range rs {
		rs[i] = dialRaw(t, srv)
	}
	type result struct {
		reply bson.Raw
		err   error
	}
	results := make(chan result, conns)
	for _, r := range rs {
		go func() {
			reply, err := r.runErr(insertCmd(7, bson.E{Key: "lsid", Value: lsid(9)}, bson.E{Key: "txnNumber", Value: int64(1)}))
			results <- result{reply, err}
		}()
	}
	for range conns {
		res := <-results
		if res.err != nil {
			t.Fatal(res.err)
		}
		reply := res.reply
		checkOK(t, reply)
		if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 || reply.Lookup("writeErrors").Type != 0 {
			t.Errorf("reply %s, want n 1 without write errors", reply)
		}
	}
	count := rs[0].run(cmd("x", bson.E{Key: "count", Value: "c"}))
	if n, _ := count.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("count %s, want 1", count)
	}
}

// TestDriverRetryableWrites checks, with the official driver against a
// replica set member, that mongod's labels make the driver retry: a
// retriable error without labels in the fail point is retried, and so is a
// retriable writeConcernError, whose retry does not insert twice.
func TestDriverRetryableWrites(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("rs0"))
	// A replica set member is monitored with awaitable hellos, which wait
	// up to heartbeatFrequencyMS, and may hold up Disconnect as long.
	client := connect(t, srv.URI()+"?heartbeatFrequencyMS=500")
	coll := client.Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	inserts := func() int64 { return srv.Stats().Commands["insert"] }

	before := inserts()
	// ExceededTimeLimit (262) is retriable, and does not make the driver
	// check the server again before the retry, as a state change would.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 262, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Errorf("InsertOne after an ExceededTimeLimit without labels in the fail point: %v; want it retried", err)
	}
	if n := inserts() - before; n != 2 {
		t.Errorf("%d inserts, want 2: the first and its retry", n)
	}

	before = inserts()
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1,
		WriteConcernError: bson.D{{Key: "code", Value: int32(262)}, {Key: "errmsg", Value: "exceeded time limit"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Errorf("InsertOne after a writeConcernError: %v; want it retried, and the retry to get the first reply", err)
	}
	if n := inserts() - before; n != 2 {
		t.Errorf("%d inserts, want 2", n)
	}
	if n, err := coll.CountDocuments(c, bson.D{}); err != nil || n != 3 {
		t.Errorf("CountDocuments = %d, %v; want 3", n, err)
	}

	// Labels given in the fail point replace the server's: none, no retry.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 262, Times: 1, ErrorLabels: []string{}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 3}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(262) || se.HasErrorLabel("RetryableWriteError") {
		t.Errorf("InsertOne with errorLabels [] in the fail point: %v; want error 262 without labels", err)
	}

	// A transaction's writes take no RetryableWriteError label: the
	// driver's WithTransaction commits them once.
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(c)
	before = inserts()
	if _, err = sess.WithTransaction(c, func(sc context.Context) (any, error) {
		return coll.InsertOne(sc, bson.D{{Key: "_id", Value: 4}})
	}); err != nil {
		t.Errorf("WithTransaction: %v", err)
	}
	if n := inserts() - before; n != 1 {
		t.Errorf("%d inserts in the transaction, want 1", n)
	}
}

// TestDriverReplicaSetDiscovery checks that the driver sees a replica set
// member: the primary of the set named.
func TestDriverReplicaSetDiscovery(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("rs0"))
	client := connect(t, srv.URI()+"?replicaSet=rs0&heartbeatFrequencyMS=500")
	var hello struct {
		SetName string   `bson:"setName"`
		Hosts   []string `bson:"hosts"`
		Primary string   `bson:"primary"`
	}
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.SetName != "rs0" || !slices.Equal(hello.Hosts, []string{srv.Addr()}) || hello.Primary != srv.Addr() {
		t.Errorf("hello = %+v", hello)
	}
	if _, err := client.Database("x").Collection("c").InsertOne(ctx(t), bson.D{{Key: "a", Value: 1}},
		options.InsertOne()); err != nil {
		t.Errorf("InsertOne through replica set discovery: %v", err)
	}
	if _, err := mongotest.Start(mongotest.WithReplicaSet("rs0"), mongotest.WithLoadBalanced(bson.ObjectID{})); err == nil {
		t.Error("Start with both WithReplicaSet and WithLoadBalanced succeeded")
	}
	if _, err := mongotest.Start(mongotest.WithReplicaSet("")); err == nil {
		t.Error("Start with WithReplicaSet(\"\") succeeded")
	}
}
