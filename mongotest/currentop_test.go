package mongotest_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCurrentOpAndKillOp checks currentOp and killOp
// (https://www.mongodb.com/docs/manual/reference/command/currentOp/,
// .../killOp/): a find whose $where sleeps is listed, and killing it stops
// its JavaScript with Interrupted (11601); so is a write waiting for a
// transaction's lock.
func TestCurrentOpAndKillOp(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Primary()
	admin, r := dialRaw(t, srv), dialRaw(t, srv)
	checkOK(t, admin.run(cmd("x", insertDocs(doc(1, 0))...)))

	// opOf waits until currentOp lists a command matching filter, and
	// returns its opid.
	opOf := func(filter bson.E) int32 {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for {
			reply := admin.run(cmd("admin", bson.E{Key: "currentOp", Value: 1}, filter))
			checkOK(t, reply)
			if ops := arrayOf(t, reply.Lookup("inprog")); len(ops) == 1 {
				return ops[0].Document().Lookup("opid").Int32()
			}
			if time.Now().After(deadline) {
				t.Fatalf("currentOp never listed %v: %s", filter, reply)
			}
			time.Sleep(time.Millisecond)
		}
	}
	done := make(chan bson.Raw, 1)
	go func() {
		done <- r.run(cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: "$where", Value: "sleep(60000) || true"}}}))
	}()
	id := opOf(bson.E{Key: "command.find", Value: "c"})
	checkOK(t, admin.run(cmd("admin", bson.E{Key: "killOp", Value: 1}, bson.E{Key: "op", Value: id})))
	checkError(t, <-done, 11601, "Interrupted")

	// A write waiting for a transaction's lock.
	x := &txn{session: lsid(1), number: 1}
	checkOK(t, admin.run(x.cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 5))))
	go func() { done <- r.run(cmd("x", bson.E{Key: "update", Value: "c"}, setV(1, 7))) }()
	waitForWaiters(t, srv, 1)
	id = opOf(bson.E{Key: "command.update", Value: "c"})
	checkOK(t, admin.run(cmd("admin", bson.E{Key: "killOp", Value: 1}, bson.E{Key: "op", Value: id})))
	reply := <-done
	if code, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); code != 11601 {
		if c, _ := reply.Lookup("code").AsInt64OK(); c != 11601 {
			t.Errorf("the killed update: %s; want Interrupted", reply)
		}
	}
	checkOK(t, admin.run(x.commit()))
	checkError(t, admin.run(cmd("x", bson.E{Key: "currentOp", Value: 1})), 13, "Unauthorized")
}
