package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestClusterTime checks the $clusterTime and operationTime of replies, as
// the causal consistency specification describes the server's: a replica
// set member's and a mongos's replies have them (errors too), the time of
// a write is later than the reads before it; a standalone's have neither,
// nor have hellos (which drivers never gossip: the sessions
// specification's "Do not gossip on SDAM commands").
func TestClusterTime(t *testing.T) {
	rs := startRS(t, 1)
	r := dialRaw(t, rs.Primary())
	times := func(reply bson.Raw) (bson.Timestamp, bson.Timestamp) {
		t.Helper()
		ct, ci, ok1 := reply.Lookup("$clusterTime", "clusterTime").TimestampOK()
		ot, oi, ok2 := reply.Lookup("operationTime").TimestampOK()
		if !ok1 || !ok2 {
			t.Fatalf("reply %s: no $clusterTime or operationTime", reply)
		}
		if st, data, ok := reply.Lookup("$clusterTime", "signature", "hash").BinaryOK(); !ok || st != 0 || len(data) != 20 {
			t.Errorf("reply %s: the signature's hash is not 20 bytes of binary", reply)
		}
		return bson.Timestamp{T: ct, I: ci}, bson.Timestamp{T: ot, I: oi}
	}
	_, before := times(r.run(cmd("x", bson.E{Key: "find", Value: "c"})))
	ct, write := times(r.run(insertCmd(1)))
	if !write.After(before) || ct.Before(write) {
		t.Errorf("a write's operationTime %v, after a read's %v, with cluster time %v", write, before, ct)
	}
	_, failed := times(r.run(insertCmd(1))) // a duplicate key: ok 1 with a write error
	if failed.Before(write) {
		t.Errorf("operationTime went back: %v after %v", failed, write)
	}
	times(r.run(cmd("x", bson.E{Key: "nosuchcommand", Value: 1})))
	if hello := r.run(cmd("admin", bson.E{Key: "hello", Value: 1})); hello.Lookup("$clusterTime").Type != 0 || hello.Lookup("operationTime").Type != 0 {
		t.Errorf("a hello with cluster times: %s", hello)
	}

	sc := startCluster(t, 1, 1)
	times(dialRaw(t, sc.Mongoses()[0]).run(insertCmd(1)))

	sr := dialRaw(t, start(t))
	if reply := sr.run(insertCmd(1)); reply.Lookup("$clusterTime").Type != 0 || reply.Lookup("operationTime").Type != 0 {
		t.Errorf("a standalone's reply with cluster times: %s", reply)
	}
}
