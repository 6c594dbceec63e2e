package mongotest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// The behaviours asserted here are mongod's, as the MongoDB manual's
// "Transactions" pages (https://www.mongodb.com/docs/manual/core/transactions/,
// .../core/transactions-production-consideration/ and
// .../core/transactions-operations/) and the transactions specification
// (../shared/spec, transactions) describe them; the error codes are the
// server's (src/mongo/base/error_codes.yml): WriteConflict 112,
// NoSuchTransaction 251, TransactionCommitted 256,
// OperationNotSupportedInTransaction 263, TransactionTooOld 225,
// InvalidOptions 72.

// txn is a raw client's transaction: its session and number.
type txn struct {
	session bson.D
	number  int64
	started bool
}

// cmd builds a command of the transaction: the first one starts it.
func (x *txn) cmd(db string, fields ...bson.E) bson.D {
	fields = append(fields, bson.E{Key: "lsid", Value: x.session}, bson.E{Key: "txnNumber", Value: x.number},
		bson.E{Key: "autocommit", Value: false})
	if !x.started {
		fields = append(fields, bson.E{Key: "startTransaction", Value: true})
		x.started = true
	}
	return cmd(db, fields...)
}

func (x *txn) commit() bson.D {
	return x.cmd("admin", bson.E{Key: "commitTransaction", Value: 1})
}

func (x *txn) abort() bson.D {
	return x.cmd("admin", bson.E{Key: "abortTransaction", Value: 1})
}

// rawFind runs find on x.c (in the transaction x, if not nil) and returns
// the _id values it returned, and their v fields.
func rawFind(t *testing.T, r *rawConn, x *txn, filter bson.D) []bson.Raw {
	t.Helper()
	c := cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: filter})
	if x != nil {
		c = x.cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: filter})
	}
	reply := r.run(c)
	checkOK(t, reply)
	var out []bson.Raw
	for _, v := range arrayOf(t, reply.Lookup("cursor", "firstBatch")) {
		out = append(out, v.Document())
	}
	return out
}

// arrayOf returns the values of the array v.
func arrayOf(t *testing.T, v bson.RawValue) []bson.RawValue {
	t.Helper()
	a, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("%v is not an array", v)
	}
	vals, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// vOf returns the v field of the document of _id id among docs, -1 if none.
func vOf(docs []bson.Raw, id int32) int32 {
	for _, d := range docs {
		if d.Lookup("_id").Int32() == id {
			return d.Lookup("v").Int32()
		}
	}
	return -1
}

func setV(id, v int32) bson.E {
	return bson.E{Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}}},
	}}}
}

func insertDocs(docs ...bson.D) []bson.E {
	a := bson.A{}
	for _, d := range docs {
		a = append(a, d)
	}
	return []bson.E{{Key: "insert", Value: "c"}, {Key: "documents", Value: a}}
}

func doc(id, v int32) bson.D { return bson.D{{Key: "_id", Value: id}, {Key: "v", Value: v}} }

func TestTransactionCommitAndAbort(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	r, other := dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, other.run(cmd("x", insertDocs(doc(1, 0))...)))

	x := &txn{session: lsid(1), number: 1}
	checkOK(t, r.run(x.cmd("x", insertDocs(doc(2, 0))...)))
	checkOK(t, r.run(x.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 1))))
	// The transaction sees its writes; nobody else does before the commit.
	if in := rawFind(t, r, x, bson.D{}); vOf(in, 1) != 1 || vOf(in, 2) != 0 {
		t.Errorf("in the transaction: %v; want {_id 1, v 1} and {_id 2, v 0}", in)
	}
	if out := rawFind(t, other, nil, bson.D{}); len(out) != 1 || vOf(out, 1) != 0 {
		t.Errorf("outside before the commit: %v; want only {_id 1, v 0}", out)
	}
	checkOK(t, r.run(x.commit()))
	if out := rawFind(t, other, nil, bson.D{}); len(out) != 2 || vOf(out, 1) != 1 || vOf(out, 2) != 0 {
		t.Errorf("after the commit: %v; want both writes", out)
	}
	// A commit may be retried; an abort after it is refused.
	checkOK(t, r.run(x.commit()))
	checkError(t, r.run(x.abort()), 256, "TransactionCommitted")

	y := &txn{session: lsid(1), number: 2}
	checkOK(t, r.run(y.cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}})))
	if in := rawFind(t, r, y, bson.D{}); len(in) != 0 {
		t.Errorf("the transaction that deleted all sees %v", in)
	}
	checkOK(t, r.run(y.abort()))
	if out := rawFind(t, other, nil, bson.D{}); len(out) != 2 {
		t.Errorf("after the abort: %v; want both documents still there", out)
	}
	checkError(t, r.run(y.commit()), 251, "NoSuchTransaction")
}

func TestTransactionSnapshot(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	r, other := dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, other.run(cmd("x", insertDocs(doc(1, 0))...)))
	checkOK(t, other.run(cmd("y", insertDocs(doc(1, 0))...)))

	x := &txn{session: lsid(1), number: 1}
	if in := rawFind(t, r, x, bson.D{}); vOf(in, 1) != 0 {
		t.Fatalf("first read: %v", in)
	}
	// Writes after the snapshot, to the collection read and to one the
	// transaction has not used yet, are not seen by it.
	checkOK(t, other.run(cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 5))))
	checkOK(t, other.run(cmd("x", insertDocs(doc(2, 0))...)))
	checkOK(t, other.run(cmd("y", bson.E{Key: "update", Value: "c"}, setV(1, 7))))
	checkOK(t, other.run(cmd("y", bson.E{Key: "drop", Value: "c"}))) // not written by the transaction: no wait
	if in := rawFind(t, r, x, bson.D{}); len(in) != 1 || vOf(in, 1) != 0 {
		t.Errorf("read again: %v; want the snapshot's {_id 1, v 0} only", in)
	}
	reply := r.run(x.cmd("y", bson.E{Key: "find", Value: "c"}))
	checkOK(t, reply)
	if got := arrayOf(t, reply.Lookup("cursor", "firstBatch")); len(got) != 1 || got[0].Document().Lookup("v").Int32() != 0 {
		t.Errorf("first read of y.c, changed and dropped after the snapshot: %v; want the snapshot's {_id 1, v 0}", got)
	}
	// A collection created after the snapshot does not exist for it.
	checkOK(t, other.run(cmd("z", insertDocs(doc(1, 0))...)))
	reply = r.run(x.cmd("z", bson.E{Key: "find", Value: "c"}))
	checkOK(t, reply)
	if got := arrayOf(t, reply.Lookup("cursor", "firstBatch")); len(got) != 0 {
		t.Errorf("z.c, created after the snapshot: %v; want nothing", got)
	}
	checkOK(t, r.run(x.commit()))
}

func TestTransactionWriteConflicts(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	r1, r2, other := dialRaw(t, srv), dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, other.run(cmd("x", insertDocs(doc(1, 0), doc(2, 0))...)))

	// Two transactions write one document: the second fails at once, and
	// is aborted.
	a, b := &txn{session: lsid(1), number: 1}, &txn{session: lsid(2), number: 1}
	checkOK(t, r1.run(a.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 1))))
	reply := r2.run(b.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 2)))
	checkError(t, reply, 112, "WriteConflict")
	if got := labelsOf(t, reply); !slices.Equal(got, []string{"TransientTransactionError"}) {
		t.Errorf("WriteConflict labels %v, want [TransientTransactionError]", got)
	}
	reply = r2.run(b.cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 2)))
	checkError(t, reply, 251, "NoSuchTransaction")
	if got := labelsOf(t, reply); !slices.Equal(got, []string{"TransientTransactionError"}) {
		t.Errorf("NoSuchTransaction labels %v, want [TransientTransactionError]", got)
	}
	checkOK(t, r1.run(a.commit()))

	// A document changed after the snapshot conflicts too, even once the
	// writer is done.
	c := &txn{session: lsid(3), number: 1}
	rawFind(t, r1, c, bson.D{})
	checkOK(t, other.run(cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 9))))
	checkError(t, r1.run(c.cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 3))), 112, "WriteConflict")
	// So does inserting an _id inserted after the snapshot.
	d := &txn{session: lsid(4), number: 1}
	rawFind(t, r1, d, bson.D{})
	checkOK(t, other.run(cmd("x", insertDocs(doc(3, 0))...)))
	checkError(t, r1.run(d.cmd("x", insertDocs(doc(3, 1))...)), 112, "WriteConflict")

	if out := rawFind(t, other, nil, bson.D{}); vOf(out, 1) != 1 || vOf(out, 2) != 9 || vOf(out, 3) != 0 {
		t.Errorf("at the end: %v; want v 1, 9, 0", out)
	}
}

// waitForWaiters waits until n commands wait for a transaction on srv.
func waitForWaiters(t *testing.T, srv *mongotest.Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for srv.Stats().TransactionWaiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands wait for a transaction, want %d", srv.Stats().TransactionWaiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriteWaitsForTransaction(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	r, other := dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, other.run(cmd("x", insertDocs(doc(1, 0), doc(2, 0))...)))

	x := &txn{session: lsid(1), number: 1}
	checkOK(t, r.run(x.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 10))))
	checkOK(t, r.run(x.cmd("x", insertDocs(doc(3, 0))...)))
	// Writes of other documents go on.
	checkOK(t, other.run(cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 1))))

	// An $inc of the document the transaction wrote waits for its commit,
	// then applies to what the transaction left; an insert of the _id the
	// transaction inserted waits, then is a duplicate key.
	done := make(chan bson.Raw, 2)
	inc := cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}},
	}}})
	w1, w2 := dialRaw(t, srv), dialRaw(t, srv)
	go func() { done <- w1.run(inc) }()
	go func() { done <- w2.run(cmd("x", insertDocs(doc(3, 5))...)) }()
	waitForWaiters(t, srv, 2)
	select {
	case reply := <-done:
		t.Fatalf("a write of a locked document ran before the commit: %s", reply)
	default:
	}
	checkOK(t, r.run(x.commit()))
	var dup bool
	for range 2 {
		reply := <-done
		checkOK(t, reply)
		if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code == 11000 {
			dup = true
		}
	}
	if !dup {
		t.Error("the insert of the transaction's _id got no duplicate key error")
	}
	if out := rawFind(t, other, nil, bson.D{}); vOf(out, 1) != 11 || vOf(out, 3) != 0 {
		t.Errorf("after: %v; want {_id 1, v 11} and the transaction's {_id 3, v 0}", out)
	}
	if n := srv.Stats().TransactionWaits; n != 2 {
		t.Errorf("TransactionWaits %d, want 2", n)
	}

	// An update of many documents, one of which (not the first) a
	// transaction wrote, waits before it writes any, then writes all.
	y := &txn{session: lsid(1), number: 2}
	checkOK(t, r.run(y.cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 7))))
	go func() {
		done <- w1.run(cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 100}}}}}, {Key: "multi", Value: true},
		}}}))
	}()
	waitForWaiters(t, srv, 1)
	checkOK(t, r.run(y.abort()))
	if reply := <-done; reply.Lookup("nModified").Int32() != 3 || reply.Lookup("writeErrors").Type != 0 {
		t.Errorf("the update of many: %s; want the 3 documents modified", reply)
	}

	// A drop of a collection a transaction wrote waits for its abort.
	z := &txn{session: lsid(1), number: 3}
	checkOK(t, r.run(z.cmd("x", bson.E{Key: "update", Value: "c"}, setV(2, 7))))
	go func() { done <- w1.run(cmd("x", bson.E{Key: "drop", Value: "c"})) }()
	waitForWaiters(t, srv, 1)
	checkOK(t, r.run(z.abort()))
	checkOK(t, <-done)
}

func TestTransactionErrors(t *testing.T) {
	rs := startRS(t, 1)
	r := dialRaw(t, rs.Primary())
	checkOK(t, r.run(cmd("x", insertDocs(doc(1, 0))...)))

	x := &txn{session: lsid(1), number: 5}
	checkError(t, r.run(x.cmd("x", bson.E{Key: "count", Value: "c"})), 263, "OperationNotSupportedInTransaction")
	// mongod runs create and createIndexes in a transaction from 4.4 on:
	// this server refuses them as not implemented, rather than claim
	// they cannot run.
	for i, c := range []bson.D{{{Key: "create", Value: "new"}}, {{Key: "createIndexes", Value: "new"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}} {
		x = &txn{session: lsid(1), number: int64(100 + i)}
		if msg := checkError(t, r.run(x.cmd("x", c...)), 2, "BadValue"); !strings.HasPrefix(msg, "mongotest does not implement") {
			t.Errorf("%s in a transaction: %q, want a refusal as not implemented", c[0].Key, msg)
		}
	}
	x = &txn{session: lsid(1), number: 6}
	checkError(t, r.run(x.cmd("x", append(insertDocs(doc(2, 0)), bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}})...)), 72, "InvalidOptions")
	x = &txn{session: lsid(1), number: 7}
	checkOK(t, r.run(x.cmd("x", append(insertDocs(doc(2, 0)), bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}})...)))
	checkError(t, r.run(x.cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}})), 72, "InvalidOptions")
	checkOK(t, r.run(x.abort()))

	// A write error aborts the transaction.
	x = &txn{session: lsid(1), number: 8}
	reply := r.run(x.cmd("x", insertDocs(doc(1, 0))...))
	if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code != 11000 {
		t.Errorf("a duplicate key in a transaction: %s", reply)
	}
	if got := labelsOf(t, reply); len(got) != 0 {
		t.Errorf("a duplicate key has labels %v", got)
	}
	checkError(t, r.run(x.cmd("x", bson.E{Key: "find", Value: "c"})), 251, "NoSuchTransaction")

	// Older and equal transaction numbers.
	old := &txn{session: lsid(1), number: 3}
	checkError(t, r.run(old.cmd("x", bson.E{Key: "find", Value: "c"})), 225, "TransactionTooOld")
	again := &txn{session: lsid(1), number: 8}
	reply = r.run(again.cmd("x", bson.E{Key: "find", Value: "c"}))
	if code, _ := reply.Lookup("code").AsInt64OK(); code != 50911 {
		t.Errorf("restarting transaction 8: %s; want code 50911", reply)
	}
	none := &txn{session: lsid(2), number: 1, started: true}
	checkError(t, r.run(none.cmd("x", bson.E{Key: "find", Value: "c"})), 251, "NoSuchTransaction")
	checkError(t, r.run(cmd("admin", bson.E{Key: "commitTransaction", Value: 1})), 72, "InvalidOptions")

	// A standalone refuses transactions, as mongod does.
	sr := dialRaw(t, start(t))
	st := &txn{session: lsid(1), number: 1}
	checkError(t, sr.run(st.cmd("x", insertDocs(doc(1, 0))...)), 20, "IllegalOperation")
}

func TestTransactionLifetimeLimit(t *testing.T) {
	rs := startRS(t, 1, mongotest.WithTransactionLifetime(50*time.Millisecond))
	srv := rs.Primary()
	r, other := dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, other.run(cmd("x", insertDocs(doc(1, 0))...)))
	x := &txn{session: lsid(1), number: 1}
	checkOK(t, r.run(x.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 1))))
	// A write of the locked document waits at most until the limit, and
	// then runs: the transaction is aborted.
	checkOK(t, other.run(cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 2))))
	checkError(t, r.run(x.commit()), 251, "NoSuchTransaction")
	if out := rawFind(t, other, nil, bson.D{}); vOf(out, 1) != 2 {
		t.Errorf("after: %v; want v 2", out)
	}
}

func TestTransactionAbortedByStepDown(t *testing.T) {
	rs := startRS(t, 2)
	r := dialRaw(t, rs.Members()[0])
	x := &txn{session: lsid(1), number: 1}
	checkOK(t, r.run(x.cmd("x", insertDocs(doc(1, 0))...)))
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := rs.StepDown(c); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(1); err != nil {
		t.Fatal(err)
	}
	// The commit, sent again to the new primary, finds the transaction
	// aborted: the driver retries the whole of it.
	r1 := dialRaw(t, rs.Members()[1])
	reply := r1.run(x.commit())
	checkError(t, reply, 251, "NoSuchTransaction")
	if got := labelsOf(t, reply); !slices.Equal(got, []string{"TransientTransactionError"}) {
		t.Errorf("labels %v, want [TransientTransactionError]", got)
	}
	// Its insert never happened, and holds no lock.
	checkOK(t, r1.run(cmd("x", insertDocs(doc(1, 5))...)))
}

// TestDriverWithTransaction runs the official driver's WithTransaction,
// including a transaction whose primary steps down in the middle: the
// driver retries it on the new primary, and its writes are there once.
func TestDriverWithTransaction(t *testing.T) {
	rs := startRS(t, 3)
	w := newTopologyWatch()
	client := connectRS(t, rs, w)
	c := ctx(t)
	coll := client.Database("x").Collection("c")
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: "balance"}, {Key: "v", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(c)

	attempts := 0
	txnOpts := options.Transaction().SetReadConcern(readconcern.Snapshot())
	_, err = sess.WithTransaction(c, func(sc context.Context) (any, error) {
		attempts++
		if _, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: "balance"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: -30}}}}); err != nil {
			return nil, err
		}
		if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: attempts}, {Key: "amount", Value: 30}}); err != nil {
			return nil, err
		}
		var got bson.M
		if err := coll.FindOne(sc, bson.D{{Key: "_id", Value: "balance"}}).Decode(&got); err != nil {
			return nil, err
		}
		if got["v"] != int32(70) {
			return nil, errors.New("the transaction does not see its own update")
		}
		if attempts == 1 {
			// Outside the transaction, nothing shows yet.
			n, err := coll.CountDocuments(c, bson.D{{Key: "amount", Value: 30}})
			if err != nil || n != 0 {
				return nil, errors.New("the transaction's insert shows outside it before the commit")
			}
			// The primary steps down before the commit, and another is
			// elected: the transaction is aborted.
			if err := rs.StepDown(c); err != nil {
				return nil, err
			}
			if err := rs.Elect(1); err != nil {
				return nil, err
			}
			w.waitFor(t, "member 1 primary", hasPrimary(rs.Members(), 1))
		}
		return nil, nil
	}, txnOpts)
	if err != nil {
		t.Fatalf("WithTransaction: %v", err)
	}
	if attempts != 2 {
		t.Errorf("%d attempts, want 2: the first aborted by the step-down", attempts)
	}
	var got bson.M
	if err := coll.FindOne(c, bson.D{{Key: "_id", Value: "balance"}}).Decode(&got); err != nil || got["v"] != int32(70) {
		t.Errorf("balance %v, %v; want 70: debited once", got, err)
	}
	n, err := coll.CountDocuments(c, bson.D{{Key: "amount", Value: 30}})
	if err != nil || n != 1 {
		t.Errorf("%d transfers, %v; want 1", n, err)
	}

	// Two sessions writing one document: one of them conflicts and is
	// retried by WithTransaction until it goes through.
	s2, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.EndSession(c)
	inner := 0
	_, err = sess.WithTransaction(c, func(sc context.Context) (any, error) {
		if _, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: "balance"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
			return nil, err
		}
		inner++
		if inner > 1 {
			return nil, nil
		}
		// Another session's transaction writes the document: it conflicts,
		// with the label that tells to retry it, and is aborted.
		if err := s2.StartTransaction(); err != nil {
			return nil, err
		}
		_, err := coll.UpdateOne(mongo.NewSessionContext(c, s2), bson.D{{Key: "_id", Value: "balance"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 10}}}})
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(112) || !se.HasErrorLabel("TransientTransactionError") {
			return nil, errors.New("the second session's write did not conflict: " + errString(err))
		}
		if err := s2.AbortTransaction(c); err != nil {
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		t.Fatalf("WithTransaction with a conflict: %v", err)
	}
	if err := coll.FindOne(c, bson.D{{Key: "_id", Value: "balance"}}).Decode(&got); err != nil || got["v"] != int32(71) {
		t.Errorf("balance %v, %v; want 71", got, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestEndSessionsAbortsTransactions checks that endSessions and
// killSessions abort the sessions' transactions, whose locks are then
// free (the manual's endSessions and killSessions pages).
func TestEndSessionsAbortsTransactions(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	r, other := dialRaw(t, srv), dialRaw(t, srv)
	for i, command := range []string{"endSessions", "killSessions"} {
		x := &txn{session: lsid(byte(10 + i)), number: 1}
		id := int32(i)
		checkOK(t, r.run(x.cmd("x", insertDocs(doc(id, 0))...)))
		checkOK(t, other.run(cmd("admin", bson.E{Key: command, Value: bson.A{x.session}})))
		checkOK(t, other.run(cmd("x", insertDocs(doc(id, 5))...)))
		checkError(t, r.run(x.commit()), 251, "NoSuchTransaction")
		if out := rawFind(t, other, nil, bson.D{{Key: "_id", Value: id}}); vOf(out, id) != 5 {
			t.Errorf("%s: %v; want the insert outside the transaction", command, out)
		}
	}
	checkError(t, r.run(cmd("admin", bson.E{Key: "killSessions", Value: 1})), 14, "TypeMismatch")
	checkOK(t, r.run(cmd("admin", bson.E{Key: "refreshSessions", Value: bson.A{lsid(1)}})))
}
