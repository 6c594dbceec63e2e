package mongopool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// The rules asserted here are the transactions specification's
// (../shared/spec/transactions.md: "Constructing commands within a
// transaction", commitTransaction, abortTransaction, "Mongos Pinning",
// "Error Reporting and Retrying Transactions") and the convenient API's
// (transactions-convenient-api.md).

func insertOf(id any) bson.D {
	return bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}}
}

// countIn counts the documents of db.c.
func countIn(t *testing.T, c *mongopool.Client, opts ...mongopool.CommandOption) int32 {
	t.Helper()
	reply, err := c.Read(ctx(t), "db", bson.D{{Key: "count", Value: "c"}}, opts...)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return reply.Lookup("n").Int32()
}

func TestTransactionCommands(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	s := startSession(t, c)
	if err := s.StartTransaction(&mongopool.TransactionOptions{ReadConcern: "snapshot", WriteConcern: bson.D{{Key: "w", Value: "majority"}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.TransactionState(); got != "starting" {
		t.Errorf("state %q after StartTransaction, want starting", got)
	}
	if err := s.StartTransaction(nil); !errors.Is(err, mongopool.ErrTransactionInProgress) {
		t.Errorf("StartTransaction again: %v", err)
	}
	if _, err := c.Write(ctx, "db", insertOf(1), mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if got := s.TransactionState(); got != "in_progress" {
		t.Errorf("state %q after the first command, want in_progress", got)
	}
	if _, err := c.Write(ctx, "db", insertOf(2), mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	// A cursor's getMore is a command of the transaction too.
	cur, err := c.Cursor(ctx, "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}, mongopool.WithSession(s))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := cur.All(ctx)
	if err != nil || len(docs) != 2 {
		t.Fatalf("the transaction's find: %d documents, %v; want its 2 inserts", len(docs), err)
	}
	if n := countIn(t, c); n != 0 {
		t.Errorf("outside the transaction, %d documents before the commit", n)
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countIn(t, c); n != 2 {
		t.Errorf("%d documents after the commit, want 2", n)
	}

	var started []bson.Raw
	for _, e := range log.takeAll(t, c) {
		if e.Type == mongopool.CommandStarted && e.Name != "count" {
			started = append(started, e.Command)
		}
	}
	names := []string{"insert", "insert", "find", "getMore", "commitTransaction"}
	if len(started) != len(names) {
		t.Fatalf("%d commands, want %v", len(started), names)
	}
	lsid := started[0].Lookup("lsid")
	for i, cmd := range started {
		if got := cmd.Index(0).Key(); got != names[i] {
			t.Errorf("command %d is %s, want %s", i, got, names[i])
		}
		if n, ok := cmd.Lookup("txnNumber").Int64OK(); !ok || n != 1 {
			t.Errorf("%s: txnNumber %v, want 1", names[i], cmd.Lookup("txnNumber"))
		}
		if ac, ok := cmd.Lookup("autocommit").BooleanOK(); !ok || ac {
			t.Errorf("%s: autocommit %v, want false", names[i], cmd.Lookup("autocommit"))
		}
		if !cmd.Lookup("lsid").Equal(lsid) {
			t.Errorf("%s: another lsid", names[i])
		}
		_, start := cmd.LookupErr("startTransaction")
		_, rc := cmd.LookupErr("readConcern")
		if (i == 0) != (start == nil) || (i == 0) != (rc == nil) {
			t.Errorf("%s: startTransaction and readConcern present: %v, %v; want them on the first command only", names[i], start == nil, rc == nil)
		}
		_, wc := cmd.LookupErr("writeConcern")
		if (names[i] == "commitTransaction") != (wc == nil) {
			t.Errorf("%s: writeConcern present: %v; want it on the commit only", names[i], wc == nil)
		}
	}
	if db := started[4].Lookup("$db").StringValue(); db != "admin" {
		t.Errorf("commitTransaction on %s, want admin", db)
	}

	// The commit may be called again: it is sent again with w: majority
	// and a wtimeout.
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	again := log.take(t, c, "commitTransaction")[0].Command
	if w := again.Lookup("writeConcern", "w").StringValue(); w != "majority" || again.Lookup("writeConcern", "wtimeout").Int32() != 10000 {
		t.Errorf("commit again: writeConcern %s, want {w: majority, wtimeout: 10000}", again.Lookup("writeConcern"))
	}
	if err := s.AbortTransaction(ctx); !errors.Is(err, mongopool.ErrAbortAfterCommit) {
		t.Errorf("abort after commit: %v", err)
	}
	// A command outside a transaction ends its committed state.
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if got := s.TransactionState(); got != "none" {
		t.Errorf("state %q after a command outside a transaction, want none", got)
	}
	if cmd := log.take(t, c, "count")[0].Command; cmd.Lookup("txnNumber").Type != 0 || cmd.Lookup("autocommit").Type != 0 {
		t.Errorf("a command outside the transaction has its fields: %s", cmd)
	}
	if err := s.CommitTransaction(ctx); !errors.Is(err, mongopool.ErrNoTransactionStarted) {
		t.Errorf("commit without a transaction: %v", err)
	}
}

func TestTransactionAbortAndErrors(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	s, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	// A transaction with no command sends neither commit nor abort.
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortTransaction(ctx); !errors.Is(err, mongopool.ErrAbortTwice) {
		t.Errorf("abort twice: %v", err)
	}
	if err := s.CommitTransaction(ctx); !errors.Is(err, mongopool.ErrCommitAfterAbort) {
		t.Errorf("commit after abort: %v", err)
	}
	if events := log.takeAll(t, c); len(events) != 0 {
		t.Errorf("%d command events for an empty transaction, want none", len(events))
	}

	// The abort of a transaction that ran a command is sent; its writes
	// are gone.
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, "db", insertOf(1), mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	// Commands of a transaction take no read preference but primary, and
	// no read or write concern of their own.
	secondary := topology.ReadPref{Mode: topology.ModeSecondaryPreferred}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}, mongopool.WithSession(s), mongopool.WithReadPreference(secondary)); !errors.Is(err, mongopool.ErrTransactionReadPref) {
		t.Errorf("a secondaryPreferred read in a transaction: %v", err)
	}
	withWC := append(insertOf(2), bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}})
	if _, err := c.Write(ctx, "db", withWC, mongopool.WithSession(s)); !errors.Is(err, mongopool.ErrConcernInTransaction) {
		t.Errorf("a write concern in a transaction: %v", err)
	}
	if err := s.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(log.take(t, c, "abortTransaction")); n != 2 {
		t.Errorf("%d abortTransaction events, want 2 (started, succeeded)", n)
	}
	if n := countIn(t, c); n != 0 {
		t.Errorf("%d documents after the abort", n)
	}

	// A write error aborts the transaction on the server: the next command
	// fails with NoSuchTransaction, labelled transient.
	if _, err := c.Write(ctx, "db", insertOf(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	var we *mongopool.WriteErrors
	if _, err := c.Write(ctx, "db", insertOf(1), mongopool.WithSession(s)); !errors.As(err, &we) {
		t.Fatalf("a duplicate key in a transaction: %v", err)
	}
	_, err = c.Write(ctx, "db", insertOf(2), mongopool.WithSession(s))
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 251 || !pool.HasErrorLabel(err, mongopool.LabelTransientTransactionError) {
		t.Errorf("after the abort: %v; want NoSuchTransaction, transient", err)
	}
	// EndSession aborts the transaction still in progress.
	s.EndSession(ctx)
	if n := len(log.take(t, c, "abortTransaction")); n != 2 {
		t.Errorf("%d abortTransaction events at EndSession, want 2", n)
	}

	// A standalone has no transactions.
	sc := newClient(t, startServer(t).URI())
	ss := startSession(t, sc)
	if _, err := sc.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := ss.StartTransaction(nil); !errors.Is(err, mongopool.ErrTransactionsUnsupported) {
		t.Errorf("StartTransaction on a standalone: %v", err)
	}
}

// TestWithTransaction runs the convenient API: a callback whose
// transaction a step-down aborts is run again on the new primary, and its
// writes are there once; a commit whose connection breaks is sent again,
// and reported committed; a callback's own error aborts and is returned.
func TestWithTransaction(t *testing.T) {
	rs := startReplicaSet(t, 3)
	var log commandLog
	c := newClient(t, rs.URI()+"&heartbeatFrequencyMS=500", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	s := startSession(t, c)

	calls := 0
	err := s.WithTransaction(ctx, func(ctx context.Context) error {
		calls++
		if _, err := c.Write(ctx, "db", insertOf(calls), mongopool.WithSession(s)); err != nil {
			return err
		}
		if calls == 1 {
			if err := rs.StepDown(ctx); err != nil {
				return err
			}
			if err := rs.Elect(1); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("WithTransaction across a step-down: %v", err)
	}
	if calls != 2 {
		t.Errorf("%d calls, want 2", calls)
	}
	if n := countIn(t, c); n != 1 {
		t.Errorf("%d documents, want the second attempt's only", n)
	}

	// The commit's connection closes before the reply: the commit is sent
	// again, and the server, which committed, says so.
	primary := rs.Primary()
	if err := primary.SetFailPoint(mongotest.FailPoint{Commands: []string{"commitTransaction"}, CloseConnection: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	log.takeAll(t, c)
	if err := s.WithTransaction(ctx, func(ctx context.Context) error {
		_, err := c.Write(ctx, "db", insertOf("x"), mongopool.WithSession(s))
		return err
	}, nil); err != nil {
		t.Fatalf("WithTransaction with a broken commit: %v", err)
	}
	commits := log.take(t, c, "commitTransaction")
	var sent []bson.Raw
	for _, e := range commits {
		if e.Type == mongopool.CommandStarted {
			sent = append(sent, e.Command)
		}
	}
	if len(sent) != 2 || sent[1].Lookup("writeConcern", "w").StringValue() != "majority" {
		t.Errorf("commits sent: %v; want 2, the second with w: majority", sent)
	}

	// A command of the transaction whose connection breaks fails with a
	// transient error: the whole transaction runs again.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, CloseConnection: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	calls = 0
	var first error
	if err := s.WithTransaction(ctx, func(ctx context.Context) error {
		calls++
		_, err := c.Write(ctx, "db", insertOf("z"), mongopool.WithSession(s))
		if calls == 1 {
			first = err
		}
		return err
	}, nil); err != nil {
		t.Fatalf("WithTransaction with a broken insert: %v", err)
	}
	if calls != 2 || !pool.HasErrorLabel(first, mongopool.LabelTransientTransactionError) {
		t.Errorf("%d calls, the first failing with %v; want 2, the first transient", calls, first)
	}

	// A callback error that is not transient aborts the transaction and
	// comes back as it is, once.
	mine := errors.New("the callback's own error")
	calls = 0
	err = s.WithTransaction(ctx, func(ctx context.Context) error {
		calls++
		if _, err := c.Write(ctx, "db", insertOf("y"), mongopool.WithSession(s)); err != nil {
			return err
		}
		return mine
	}, nil)
	if !errors.Is(err, mine) || calls != 1 {
		t.Errorf("WithTransaction = %v after %d calls; want the callback's error after 1", err, calls)
	}
	if got := s.TransactionState(); got != "aborted" {
		t.Errorf("state %q, want aborted", got)
	}
	if n := countIn(t, c); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}
}

// TestTransactionPinnedToMongos checks that a sharded transaction's
// commands, its commit included, go to the mongos its first command went
// to, and the commit carries the recoveryToken the mongos gave.
func TestTransactionPinnedToMongos(t *testing.T) {
	cluster, err := mongotest.StartShardedCluster(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	var log commandLog
	c := newClient(t, cluster.URI()+"?localThresholdMS=1000", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	waitTopology(t, c, "two mongoses", hasTypes(map[topology.ServerType]int{topology.Mongos: 2}))
	s := startSession(t, c)
	for round := range 3 {
		if err := s.StartTransaction(nil); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := c.Write(ctx, "db", insertOf(round*10+i), mongopool.WithSession(s)); err != nil {
				t.Fatal(err)
			}
		}
		pinned := s.PinnedServer()
		if pinned == "" {
			t.Fatal("the transaction is not pinned")
		}
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, e := range log.takeAll(t, c) {
			if e.Type == mongopool.CommandStarted {
				addrs = append(addrs, e.Address)
				if e.Name == "commitTransaction" && e.Command.Lookup("recoveryToken").Type != bson.TypeEmbeddedDocument {
					t.Errorf("the commit has no recoveryToken: %s", e.Command)
				}
			}
		}
		if len(addrs) != 6 || slices.ContainsFunc(addrs, func(a string) bool { return a != pinned }) {
			t.Errorf("round %d: commands went to %v; want all 6 to %s", round, addrs, pinned)
		}
		// Committing does not unpin; a command outside a transaction does.
		if s.PinnedServer() != pinned {
			t.Error("the commit unpinned the session")
		}
		if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithSession(s)); err != nil {
			t.Fatal(err)
		}
		if s.PinnedServer() != "" {
			t.Error("a command outside a transaction left the session pinned")
		}
		log.takeAll(t, c)
	}
	// Both mongoses see the 15 documents the transactions committed.
	for range 4 {
		if n := countIn(t, c); n != 15 {
			t.Errorf("%d documents, want 15", n)
		}
	}
}

// TestTransactionBehindLoadBalancer checks that a transaction behind a
// load balancer runs on one connection, which goes back to the pool at
// its end.
func TestTransactionBehindLoadBalancer(t *testing.T) {
	srv := startServer(t, mongotest.WithLoadBalanced(bson.NewObjectID()))
	var log commandLog
	c := newClient(t, srv.URI()+"?loadBalanced=true", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	s := startSession(t, c)
	if err := s.StartTransaction(nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Write(ctx, "db", insertOf(i), mongopool.WithSession(s)); err != nil {
			t.Fatal(err)
		}
		// The transaction keeps its connection between its commands.
		if inUse := c.Pools()[0].Stats().InUse; inUse != 1 {
			t.Errorf("after command %d, %d connections in use, want the pinned one", i, inUse)
		}
		// Another command meanwhile takes another connection.
		if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	conns := map[int64]bool{}
	for _, e := range log.takeAll(t, c) {
		if e.Type == mongopool.CommandStarted && e.Name != "ping" {
			conns[e.ConnectionID] = true
		}
	}
	if len(conns) != 1 {
		t.Errorf("the transaction's commands went over %d connections, want 1", len(conns))
	}
	// A command outside the transaction unpins the connection.
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	if s.PinnedServer() != "" {
		t.Error("the connection is still pinned")
	}
	if n := countIn(t, c); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}
}

// A commit retried after an overload error keeps its write concern (the
// transactions specification's "Interaction with Client Backpressure");
// after another retryable error it takes w: majority, and keeps it for the
// overload errors after.
func TestCommitRetryWriteConcernAfterOverload(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	overload := mongotest.FailPoint{Commands: []string{"commitTransaction"}, ErrorCode: 112,
		ErrorLabels: []string{"RetryableError", "SystemOverloadedError"}}
	commitWCs := func(setup ...mongotest.FailPoint) []bson.RawValue {
		t.Helper()
		s := startSession(t, c)
		if err := s.StartTransaction(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(ctx, "db", insertOf(bson.NewObjectID()), mongopool.WithSession(s)); err != nil {
			t.Fatal(err)
		}
		for _, fp := range setup {
			if err := rs.Members()[0].SetFailPoint(fp); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		var wcs []bson.RawValue
		for _, e := range log.take(t, c, "commitTransaction") {
			if e.Type == mongopool.CommandStarted {
				wcs = append(wcs, e.Command.Lookup("writeConcern"))
			}
		}
		return wcs
	}
	overload.Times = 2
	wcs := commitWCs(overload)
	if len(wcs) != 3 {
		t.Fatalf("%d commits, want 3 (two overload errors)", len(wcs))
	}
	for i, wc := range wcs {
		if wc.Type != 0 {
			t.Errorf("commit %d after overload errors only: writeConcern %s, want none, as the first", i, wc)
		}
	}
}

// A commit's network error, after the retry, is labelled
// RetryableWriteError, as any retryable write's network error is, and
// UnknownTransactionCommitResult (the transactions specification: the
// commit is a retryable write whatever retryWrites says).
func TestCommitNetworkErrorLabels(t *testing.T) {
	rs := startReplicaSet(t, 1)
	lb := startServer(t, mongotest.WithLoadBalanced(bson.NewObjectID()))
	for _, uri := range []string{rs.URI(), rs.URI() + "&retryWrites=false", lb.URI() + "?loadBalanced=true"} {
		srv := rs.Members()[0]
		if strings.Contains(uri, "loadBalanced") {
			srv = lb
		}
		c := newClient(t, uri)
		ctx := ctx(t)
		s, err := c.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.StartTransaction(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(ctx, "db", insertOf(bson.NewObjectID()), mongopool.WithSession(s)); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"commitTransaction"}, Times: 2, CloseConnection: true}); err != nil {
			t.Fatal(err)
		}
		err = s.CommitTransaction(ctx)
		if err == nil {
			t.Fatalf("%s: a commit whose connections were closed succeeded", uri)
		}
		for _, l := range []string{"RetryableWriteError", mongopool.LabelUnknownTransactionCommitResult} {
			if !pool.HasErrorLabel(err, l) {
				t.Errorf("%s: the commit's error %v has no label %s", uri, err, l)
			}
		}
		if pool.HasErrorLabel(err, mongopool.LabelTransientTransactionError) {
			t.Errorf("%s: the commit's error %v is labelled TransientTransactionError", uri, err)
		}
		if err := s.CommitTransaction(ctx); err != nil {
			t.Errorf("%s: the commit again: %v", uri, err)
		}
		s.EndSession(ctx)
	}
}

// A transaction cannot have an unacknowledged write concern (the
// transactions specification's startTransaction).
func TestStartTransactionUnacknowledged(t *testing.T) {
	rs := startReplicaSet(t, 1)
	c := newClient(t, rs.URI())
	s, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx(t))
	for _, w := range []any{0, int64(0), 0.0} {
		err := s.StartTransaction(&mongopool.TransactionOptions{WriteConcern: bson.D{{Key: "w", Value: w}}})
		if !errors.Is(err, mongopool.ErrUnacknowledgedTransaction) {
			t.Errorf("w: %T 0: %v, want ErrUnacknowledgedTransaction", w, err)
		}
		if got := s.TransactionState(); got != "none" {
			t.Errorf("state %q after the refused start, want none", got)
		}
	}
	if err := s.StartTransaction(&mongopool.TransactionOptions{WriteConcern: bson.D{{Key: "w", Value: 1}}}); err != nil {
		t.Errorf("w: 1: %v", err)
	}
}

// WithTransaction does not retry a commit that failed with
// MaxTimeMSExpired, whether as the command's error or as its write
// concern error (the convenient API specification).
func TestWithTransactionMaxTimeMSExpired(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	for _, fp := range []mongotest.FailPoint{
		{Commands: []string{"commitTransaction"}, Times: 1, ErrorCode: 50},
		{Commands: []string{"commitTransaction"}, Times: 1, WriteConcernError: bson.D{{Key: "code", Value: 50},
			{Key: "codeName", Value: "MaxTimeMSExpired"}, {Key: "errmsg", Value: "operation exceeded time limit"}}},
	} {
		s, err := c.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Members()[0].SetFailPoint(fp); err != nil {
			t.Fatal(err)
		}
		err = s.WithTransaction(ctx, func(ctx context.Context) error {
			_, err := c.Write(ctx, "db", insertOf(bson.NewObjectID()), mongopool.WithSession(s))
			return err
		}, nil)
		s.EndSession(ctx)
		if err == nil || !pool.HasErrorLabel(err, mongopool.LabelUnknownTransactionCommitResult) {
			t.Errorf("%+v: WithTransaction: %v, want the commit's MaxTimeMSExpired error, labelled UnknownTransactionCommitResult", fp, err)
		}
		if n := len(log.take(t, c, "commitTransaction")); n != 2 {
			t.Errorf("%+v: %d commit events, want one commit", fp, n)
		}
	}
}
