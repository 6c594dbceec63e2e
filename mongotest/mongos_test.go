package mongotest_test

import (
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestMongosHello checks the handshake of a server started WithMongos: a
// mongos's, which drivers reach without a load balancer.
func TestMongosHello(t *testing.T) {
	srv := start(t, mongotest.WithMongos())
	for _, name := range []string{"hello", "isMaster"} {
		reply := dialRaw(t, srv).run(cmd("admin", bson.E{Key: name, Value: 1}))
		checkOK(t, reply)
		if m, _ := reply.Lookup("msg").StringValueOK(); m != "isdbgrid" {
			t.Errorf("%s: msg %q, want isdbgrid", name, m)
		}
		writable := "isWritablePrimary"
		if name == "isMaster" {
			writable = "ismaster"
		}
		if ok, _ := reply.Lookup(writable).BooleanOK(); !ok {
			t.Errorf("%s: %s is not true: %s", name, writable, reply)
		}
		for _, field := range []string{"setName", "hosts", "me", "topologyVersion", "serviceId"} {
			if _, err := reply.LookupErr(field); err == nil {
				t.Errorf("%s: a mongos reports no %s: %s", name, field, reply)
			}
		}
	}
	status := dialRaw(t, srv).run(cmd("admin", bson.E{Key: "serverStatus", Value: 1}))
	if p, _ := status.Lookup("process").StringValueOK(); p != "mongos" {
		t.Errorf("serverStatus process %q, want mongos", p)
	}
}

// TestMongosTakesRetryableWrites checks that a mongos takes the txnNumber a
// standalone refuses, runs the write once, and answers a retry with the
// first reply.
func TestMongosTakesRetryableWrites(t *testing.T) {
	srv := start(t, mongotest.WithMongos())
	r := dialRaw(t, srv)
	write := insertCmd(1, bson.E{Key: "lsid", Value: lsid(1)}, bson.E{Key: "txnNumber", Value: int64(1)})
	for i := range 2 {
		reply := r.run(write)
		checkOK(t, reply)
		if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
			t.Errorf("attempt %d: n = %d, want 1 (the first reply, again)", i+1, n)
		}
	}
	reply := r.run(cmd("x", bson.E{Key: "count", Value: "c"}))
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("count %d after a write and its retry, want 1: %s", n, reply)
	}
}

// TestDriverMongos runs the official driver against two mongoses: it finds
// a sharded cluster of two mongoses, and runs commands through them.
func TestDriverMongos(t *testing.T) {
	a, b := start(t, mongotest.WithMongos()), start(t, mongotest.WithMongos())
	w := newTopologyWatch()
	client := connectWith(t, options.Client().ApplyURI("mongodb://"+a.Addr()+","+b.Addr()+"/").
		SetServerMonitor(w.monitor()).SetServerSelectionTimeout(testTimeout))
	if _, err := client.Database("x").Collection("c").InsertOne(ctx(t), bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	w.waitFor(t, "a sharded cluster of two mongoses", func(d event.TopologyDescription) bool {
		return describe(d) == `Sharded "": `+a.Addr()+"=Mongos "+b.Addr()+"=Mongos" ||
			describe(d) == `Sharded "": `+b.Addr()+"=Mongos "+a.Addr()+"=Mongos"
	})
}

// TestMongosRefused checks that a server cannot be both a mongos and a
// replica set member.
func TestMongosRefused(t *testing.T) {
	want := "WithMongos and WithReplicaSet"
	if srv, err := mongotest.Start(mongotest.WithMongos(), mongotest.WithReplicaSet("rs")); err == nil {
		srv.Close()
		t.Error("Start with WithMongos and WithReplicaSet succeeded")
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %v; want an error saying %q", err, want)
	}
	if rs, err := mongotest.StartReplicaSet("rs", 2, mongotest.WithMongos()); err == nil {
		rs.Close()
		t.Error("StartReplicaSet with WithMongos succeeded")
	} else if want := "WithMongos makes a mongos"; !strings.Contains(err.Error(), want) {
		t.Errorf("StartReplicaSet: %v; want an error saying %q", err, want)
	}
}
