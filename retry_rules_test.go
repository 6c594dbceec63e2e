package mongopool_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// commandLog records a client's command events.
type commandLog struct {
	mu     sync.Mutex
	events []mongopool.CommandEvent
}

func (l *commandLog) handler(e mongopool.CommandEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// take returns the events of the commands named name since the last take,
// once the client has delivered them all, and forgets every event.
func (l *commandLog) take(t *testing.T, c *mongopool.Client, name string) []mongopool.CommandEvent {
	t.Helper()
	return named(l.takeAll(t, c), name)
}

// takeAll returns the events since the last take, once the client has
// delivered them all.
func (l *commandLog) takeAll(t *testing.T, c *mongopool.Client) []mongopool.CommandEvent {
	t.Helper()
	flush(t, c)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// named returns the events of the commands named name.
func named(events []mongopool.CommandEvent, name string) []mongopool.CommandEvent {
	var out []mongopool.CommandEvent
	for _, e := range events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// The retryable reads specification's prose tests 3.1 to 3.3: in a replica
// set, a read retried after an error goes back to the same server unless
// the error is an overload error and enableOverloadRetargeting is on; only
// sharded clusters deprioritize the failed server on every retryable error.
func TestRetriedReadsInAReplicaSet(t *testing.T) {
	overload := []string{pool.LabelRetryable, pool.LabelSystemOverloaded}
	for _, tc := range []struct {
		name      string
		labels    []string
		retarget  bool
		elsewhere bool
	}{
		{"3.1 overload error, retargeting on", overload, true, true},
		{"3.2 other retryable error", []string{pool.LabelRetryable}, false, false},
		{"3.2 other retryable error, retargeting on", []string{pool.LabelRetryable}, true, false},
		{"3.3 overload error, retargeting off", overload, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := startReplicaSet(t, 2)
			var log commandLog
			c := newClient(t, rs.URI()+"&readPreference=primaryPreferred&heartbeatFrequencyMS=500",
				mongopool.WithCommandEventHandler(log.handler), mongopool.WithOverloadRetargeting(tc.retarget))
			ctx := ctx(t)
			// Both members known, so that the first attempt goes to the
			// primary and the retry has a choice.
			waitTopology(t, c, "a primary and a secondary", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 1}))
			primary := rs.Primary()
			if err := primary.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 1, ErrorCode: 6,
				ErrorLabels: tc.labels}); err != nil {
				t.Fatal(err)
			}
			log.take(t, c, "find")
			if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
				t.Fatalf("the retried find failed: %v", err)
			}
			var failed, succeeded []string
			for _, e := range log.take(t, c, "find") {
				switch e.Type {
				case mongopool.CommandFailed:
					failed = append(failed, e.Address)
				case mongopool.CommandSucceeded:
					succeeded = append(succeeded, e.Address)
				}
			}
			if len(failed) != 1 || len(succeeded) != 1 || failed[0] != primary.Addr() {
				t.Fatalf("find failed on %v and succeeded on %v; want once each, failing on the primary %s", failed, succeeded, primary.Addr())
			}
			if elsewhere := succeeded[0] != failed[0]; elsewhere != tc.elsewhere {
				t.Fatalf("the retry ran on %s after failing on %s; want another server: %v", succeeded[0], failed[0], tc.elsewhere)
			}
		})
	}
}

// A 4.4+ server labels the errors after which a write may be retried: a
// code the reads retry on, without RetryableWriteError, fails the write.
func TestRetryableWriteNeedsTheLabel(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: 11602,
		ErrorLabels: []string{}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 11602 {
		t.Fatalf("a write failing with 11602 unlabelled: %v, want that error", err)
	}
	if n := len(log.take(t, c, "insert")); n != 2 {
		t.Fatalf("%d insert events, want 2: one attempt", n)
	}
}

// A server older than 4.4 labels nothing: the client labels the errors the
// retryable writes specification lists, by their code, and retries.
func TestRetryableWriteOnAPre44Server(t *testing.T) {
	rs := startReplicaSet(t, 1, mongotest.WithWireVersions(0, 8))
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	insert := func(id int) error {
		_, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}})
		return err
	}
	for i, fp := range []mongotest.FailPoint{
		{Commands: []string{"insert"}, Times: 1, ErrorCode: 91, ErrorLabels: []string{}},
		{Commands: []string{"insert"}, Times: 1, ErrorLabels: []string{},
			WriteConcernError: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "shutting down"}}},
	} {
		if err := rs.Primary().SetFailPoint(fp); err != nil {
			t.Fatal(err)
		}
		if err := insert(i); err != nil {
			t.Fatalf("fail point %d: the write was not retried: %v", i, err)
		}
		if n := len(log.take(t, c, "insert")); n != 4 {
			t.Fatalf("fail point %d: %d insert events, want 4: two attempts", i, n)
		}
	}
	// A code not on the list is not labelled.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: 2,
		ErrorLabels: []string{}}); err != nil {
		t.Fatal(err)
	}
	err := insert(10)
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 || ce.HasErrorLabel("RetryableWriteError") {
		t.Fatalf("BadValue from a 4.2 server: %v, want it unlabelled", err)
	}
	// The label the client adds is on the error it returns.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 2, ErrorCode: 189,
		ErrorLabels: []string{}}); err != nil {
		t.Fatal(err)
	}
	err = insert(11)
	if !pool.HasErrorLabel(err, "RetryableWriteError") {
		t.Fatalf("PrimarySteppedDown twice from a 4.2 server: %v, want it labelled RetryableWriteError", err)
	}
}

// pollAfterStateChange is the URI option of the tests whose retries follow
// a state change error (InterruptedDueToReplStateChange) from a
// standalone: the error marks the server Unknown, and the retry waits for
// the monitor's next check. A monitor that polls checks at once, as the
// error asks; one that streams the hellos of a standalone of 4.4 or later
// ignores the request while its awaitable hello is in progress
// (server-monitoring.md, "Requesting an immediate check"), and a
// standalone's errors carry no topologyVersion that would make them stale
// (mongod adds it to NotPrimaryError codes of replica set members only),
// so the retry would wait heartbeatFrequencyMS for the stream's next reply.
const pollAfterStateChange = "serverMonitoringMode=poll"

// Each attempt tells the server the time left of timeoutMS, not the whole
// of it: a retry after an attempt that took 300ms has at most the rest.
func TestRetryMaxTimeMSIsTheTimeLeft(t *testing.T) {
	const timeout, blocked = 3 * time.Second, 300 * time.Millisecond
	srv := startServer(t)
	var log commandLog
	// The monitor polls (see pollAfterStateChange).
	c := newClient(t, srv.URI()+"?timeoutMS=3000&"+pollAfterStateChange, mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 1, BlockTime: blocked, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	var maxTimes []int64
	for _, e := range log.take(t, c, "find") {
		if e.Type == mongopool.CommandStarted {
			maxTimes = append(maxTimes, e.Command.Lookup("maxTimeMS").AsInt64())
		}
	}
	if len(maxTimes) != 2 || maxTimes[0] > timeout.Milliseconds() || maxTimes[1] > (timeout-blocked).Milliseconds() {
		t.Fatalf("maxTimeMS of the attempts %v; want at most %d, then at most %d", maxTimes, timeout.Milliseconds(),
			(timeout - blocked).Milliseconds())
	}
}

// With timeoutMS, the client side operations timeout specification retries
// a retryable error until the time is up, not once; an overload error caps
// the retries at maxAdaptiveRetries, whatever errors follow it.
func TestRetriesWithinTimeoutMS(t *testing.T) {
	srv := startServer(t)
	var log commandLog
	find := bson.D{{Key: "find", Value: "c"}}
	ctx := ctx(t)
	attempts := func(c *mongopool.Client) int {
		n := 0
		for _, e := range log.take(t, c, "find") {
			if e.Type == mongopool.CommandStarted {
				n++
			}
		}
		return n
	}
	// The monitor polls (see pollAfterStateChange).
	csot := newClient(t, srv.URI()+"?timeoutMS=20000&"+pollAfterStateChange, mongopool.WithCommandEventHandler(log.handler))
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 4, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	if _, err := csot.Read(ctx, "db", find); err != nil {
		t.Fatalf("timeoutMS set, four retryable errors: %v, want the fifth attempt's success", err)
	}
	if n := attempts(csot); n != 5 {
		t.Fatalf("%d attempts, want 5", n)
	}

	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 10, ErrorCode: 11602,
		ErrorLabels: []string{pool.LabelRetryable, pool.LabelSystemOverloaded}}); err != nil {
		t.Fatal(err)
	}
	if _, err := csot.Read(ctx, "db", find); !pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		t.Fatalf("timeoutMS set, overload errors: %v, want the last of them", err)
	}
	if n := attempts(csot); n != 3 {
		t.Fatalf("%d attempts after overload errors, want 3: maxAdaptiveRetries caps them", n)
	}
	srv.ClearFailPoints()

	plain := newClient(t, srv.URI()+"?"+pollAfterStateChange, mongopool.WithCommandEventHandler(log.handler))
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 2, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	var ce *wire.CommandError
	if _, err := plain.Read(ctx, "db", find); !errors.As(err, &ce) || ce.Code != 11602 {
		t.Fatalf("no timeoutMS, two retryable errors: %v, want the second", err)
	}
	if n := attempts(plain); n != 2 {
		t.Fatalf("%d attempts without timeoutMS, want 2: one retry", n)
	}
}

// Only the writes the retryable writes specification lists get a
// txnNumber: inserts, updates and deletes of single documents,
// findAndModify, all acknowledged. An update with multi: true, a delete
// with limit: 0, a create and an unacknowledged insert run as plain writes
// (mongod refuses the first two with a txnNumber).
func TestOnlyRetryableWritesGetATxnNumber(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log commandLog
	c := newClient(t, rs.URI(), mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	docs := bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	one := func(name string, cmd bson.D, wantTxn bool, wantN int32) {
		t.Helper()
		reply, err := c.Write(ctx, "db", cmd)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := reply.LookupErr("writeErrors"); err == nil {
			t.Fatalf("%s: writeErrors in %s", name, reply)
		}
		if n, _ := reply.Lookup("n").AsInt64OK(); wantN >= 0 && n != int64(wantN) {
			t.Fatalf("%s: n = %d, want %d (reply %s)", name, n, wantN, reply)
		}
		var started []mongopool.CommandEvent
		for _, e := range log.take(t, c, cmd[0].Key) {
			if e.Type == mongopool.CommandStarted {
				started = append(started, e)
			}
		}
		if len(started) != 1 {
			t.Fatalf("%s: %d commands sent, want 1", name, len(started))
		}
		_, err = started[0].Command.LookupErr("txnNumber")
		if hasTxn := err == nil; hasTxn != wantTxn {
			t.Fatalf("%s sent with a txnNumber: %v, want %v: %s", name, hasTxn, wantTxn, started[0].Command)
		}
	}
	one("insert", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}, true, 3)
	one("update of one", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}},
	}}}, true, 1)
	one("update with multi", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}}, {Key: "multi", Value: true}},
	}}}, false, 4)
	one("findAndModify", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 2}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}}}, true, -1)
	one("create", bson.D{{Key: "create", Value: "other"}}, false, -1)
	one("delete of one", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}}}}}, true, 1)
	one("delete of all", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}, false, 2)
	one("unacknowledged insert", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}}, false, -1)
}

// A write whose reply lists writeErrors fails with a *mongopool.WriteErrors
// naming each failed statement, with the reply's counts of what was done.
func TestWriteErrorsAreErrors(t *testing.T) {
	rs := startReplicaSet(t, 1)
	c := newClient(t, rs.URI())
	ctx := ctx(t)
	doc := func(id int) bson.D { return bson.D{{Key: "_id", Value: id}} }
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(1), doc(2)}}}); err != nil {
		t.Fatal(err)
	}
	reply, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: false},
		{Key: "documents", Value: bson.A{doc(1), doc(3), doc(2), doc(4)}}})
	var we *mongopool.WriteErrors
	if !errors.As(err, &we) {
		t.Fatalf("an insert of duplicate keys: reply %s, error %v; want a *WriteErrors", reply, err)
	}
	if len(we.Errors) != 2 || we.Errors[0].Index != 0 || we.Errors[1].Index != 2 || we.Errors[0].Code != 11000 {
		t.Fatalf("write errors %+v, want statements 0 and 2, duplicate keys", we.Errors)
	}
	if n, _ := we.Reply.Lookup("n").AsInt64OK(); n != 2 || reply != nil {
		t.Fatalf("reply %s (n %d) with the error, want it in the error only, n 2", reply, n)
	}
	if we.WriteConcernError != nil || errors.Unwrap(err) != nil {
		t.Fatalf("no write concern error in the reply, yet %v", we.WriteConcernError)
	}
	for _, want := range []string{"statement 0", "E11000", "code 11000", "and 1 more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	// With a writeConcernError too, both are there.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1,
		WriteConcernError: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(1)}}})
	var wce *mongopool.WriteConcernError
	if !errors.As(err, &we) || len(we.Errors) != 1 || !errors.As(err, &wce) || wce.Code != 64 {
		t.Fatalf("a duplicate key under a failed write concern: %v; want both", err)
	}
}

// The client labels RetryableWriteError the network errors of retryable
// writes (and a cleared pool's), when retryWrites is on, as the retryable
// writes specification says: a caller can tell it may run the write again.
func TestNetworkErrorsOfRetryableWritesAreLabelled(t *testing.T) {
	rs := startReplicaSet(t, 1)
	ctx := ctx(t)
	for _, tc := range []struct {
		query string
		label bool
	}{{"", true}, {"&retryWrites=false", false}} {
		c := newClient(t, rs.URI()+tc.query)
		if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 2, CloseConnection: true}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
		if err == nil {
			t.Fatalf("%q: the insert met closed connections, yet succeeded", tc.query)
		}
		if got := pool.HasErrorLabel(err, "RetryableWriteError"); got != tc.label {
			t.Errorf("%q: %v labelled RetryableWriteError: %v, want %v", tc.query, err, got, tc.label)
		}
		rs.Primary().ClearFailPoints()
	}
}

// A read or a retryable write whose connection fails to be established
// during authentication (a network error, after the hello) is retried on a
// new connection: the retryable reads and writes specifications retry the
// errors of the handshake. A write that is not retryable is not.
func TestHandshakeErrorRetried(t *testing.T) {
	rs := startReplicaSet(t, 1)
	if err := rs.Members()[0].AddUser("admin", "alice", "secret"); err != nil {
		t.Fatal(err)
	}
	uri := "mongodb://alice:secret@" + rs.Members()[0].Addr() + "/?replicaSet=rs"
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}}
	updateMany := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}},
		{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}}, {Key: "multi", Value: true}}}}}
	for _, tc := range []struct {
		name    string
		options string
		write   bool
		cmd     bson.D
		retried bool
	}{
		{"read", "", false, bson.D{{Key: "count", Value: "c"}}, true},
		{"read, retryReads off", "&retryReads=false", false, bson.D{{Key: "count", Value: "c"}}, false},
		{"retryable write", "", true, insert, true},
		{"retryable write, retryWrites off", "&retryWrites=false", true, insert, false},
		{"a write that is not retryable", "", true, updateMany, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, uri+tc.options)
			ctx := ctx(t)
			// The ping's connection closes, which clears the pool; the
			// next connection's authentication fails the same way.
			if err := rs.Members()[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"ping", "saslContinue"}, Times: 2, CloseConnection: true}); err != nil {
				t.Fatal(err)
			}
			defer rs.Members()[0].ClearFailPoints()
			if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err == nil {
				t.Fatal("the ping whose connection was closed succeeded")
			}
			run := c.Read
			if tc.write {
				run = c.Write
			}
			_, err := run(ctx, "db", tc.cmd)
			if tc.retried && err != nil {
				t.Errorf("not retried after the handshake's error: %v", err)
			}
			if !tc.retried && err == nil {
				t.Error("retried after the handshake's error")
			}
			if !tc.retried && tc.write && tc.options == "" && pool.HasErrorLabel(err, "RetryableWriteError") {
				t.Errorf("a write that is not retryable has the label RetryableWriteError: %v", err)
			}
		})
	}
}
