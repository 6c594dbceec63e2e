package mongotest_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestHello checks the handshake reply's fields: the limits, a distinct
// connectionId per connection, helloOk, the compressors in common (in the
// client's order), and saslSupportedMechs for a known user only.
func TestHello(t *testing.T) {
	srv := start(t, mongotest.WithCompressors("zstd", "snappy"))
	if err := srv.AddUser("db", "u", "p", mongotest.MechSCRAMSHA256); err != nil {
		t.Fatal(err)
	}
	type helloReply struct {
		IsWritablePrimary            *bool          `bson:"isWritablePrimary"`
		IsMaster                     *bool          `bson:"ismaster"`
		HelloOK                      bool           `bson:"helloOk"`
		MaxBSONObjectSize            int32          `bson:"maxBsonObjectSize"`
		MaxMessageSizeBytes          int32          `bson:"maxMessageSizeBytes"`
		MaxWriteBatchSize            int32          `bson:"maxWriteBatchSize"`
		LocalTime                    bson.DateTime  `bson:"localTime"`
		LogicalSessionTimeoutMinutes int32          `bson:"logicalSessionTimeoutMinutes"`
		ConnectionID                 int32          `bson:"connectionId"`
		MinWireVersion               int32          `bson:"minWireVersion"`
		MaxWireVersion               int32          `bson:"maxWireVersion"`
		Compression                  []string       `bson:"compression"`
		SASLSupportedMechs           []string       `bson:"saslSupportedMechs"`
		ServiceID                    *bson.ObjectID `bson:"serviceId"`
		OK                           float64        `bson:"ok"`
	}
	hello := func(r *rawConn, fields ...bson.E) helloReply {
		t.Helper()
		var h helloReply
		if err := bson.Unmarshal(r.run(cmd("admin", fields...)), &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	r1, r2 := dialRaw(t, srv), dialRaw(t, srv)
	h := hello(r1, bson.E{Key: "hello", Value: 1}, bson.E{Key: "helloOk", Value: true},
		bson.E{Key: "compression", Value: bson.A{"zlib", "snappy", "zstd"}},
		bson.E{Key: "saslSupportedMechs", Value: "db.u"})
	if h.OK != 1 || h.IsWritablePrimary == nil || !*h.IsWritablePrimary || h.IsMaster != nil || !h.HelloOK {
		t.Errorf("hello: %+v", h)
	}
	if h.MaxBSONObjectSize != 16*1024*1024 || h.MaxMessageSizeBytes != 48000000 || h.MaxWriteBatchSize != 100000 ||
		h.LogicalSessionTimeoutMinutes != 30 || h.MinWireVersion != 0 || h.MaxWireVersion != 21 || h.LocalTime == 0 || h.ServiceID != nil {
		t.Errorf("hello: %+v", h)
	}
	if !slices.Equal(h.Compression, []string{"snappy", "zstd"}) {
		t.Errorf("compression %v, want [snappy zstd]", h.Compression)
	}
	if !slices.Equal(h.SASLSupportedMechs, []string{"SCRAM-SHA-256"}) {
		t.Errorf("saslSupportedMechs %v, want [SCRAM-SHA-256]", h.SASLSupportedMechs)
	}
	h2 := hello(r2, bson.E{Key: "isMaster", Value: 1}, bson.E{Key: "saslSupportedMechs", Value: "db.nobody"},
		bson.E{Key: "compression", Value: bson.A{"zlib"}})
	if h2.IsMaster == nil || !*h2.IsMaster || h2.IsWritablePrimary != nil || h2.HelloOK || h2.SASLSupportedMechs != nil || h2.Compression != nil {
		t.Errorf("isMaster: %+v", h2)
	}
	if h.ConnectionID == h2.ConnectionID || h.ConnectionID == 0 || h2.ConnectionID == 0 {
		t.Errorf("connectionIds %d and %d, want distinct and non-zero", h.ConnectionID, h2.ConnectionID)
	}
	if again := hello(r1, bson.E{Key: "ismaster", Value: 1}); again.ConnectionID != h.ConnectionID {
		t.Errorf("connectionId changed on the same connection: %d then %d", h.ConnectionID, again.ConnectionID)
	}

	lb := start(t, mongotest.WithLoadBalanced(bson.ObjectID{}))
	r3 := dialRaw(t, lb)
	checkError(t, r3.run(cmd("admin", bson.E{Key: "hello", Value: 1})), 354, "LoadBalancerSupportMismatch")
	if h := hello(r3, bson.E{Key: "hello", Value: 1}, bson.E{Key: "loadBalanced", Value: true}); h.ServiceID == nil || *h.ServiceID != lb.ServiceID() || lb.ServiceID().IsZero() {
		t.Errorf("load-balanced hello: serviceId %v, want %v", h.ServiceID, lb.ServiceID())
	}
}

// TestOpQuery checks the legacy OP_QUERY handshake (a hello answered with an
// OP_REPLY) and that OP_QUERY carries nothing else.
func TestOpQuery(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	query := func(ns string, q bson.D) bson.Raw {
		t.Helper()
		r.send(opQuery(77, ns, marshal(t, q)))
		b := r.read()
		h, _ := wire.ParseHeader(b)
		if h.OpCode != 1 || h.ResponseTo != 77 || len(b) < 36 {
			t.Fatalf("reply header %v, want an OP_REPLY to 77", h)
		}
		if n := binary.LittleEndian.Uint32(b[32:]); n != 1 {
			t.Fatalf("numberReturned %d, want 1", n)
		}
		return bson.Raw(b[36:])
	}
	reply := query("admin.$cmd", bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}})
	if ok, _ := reply.Lookup("ismaster").BooleanOK(); !ok {
		t.Errorf("isMaster reply %s", reply)
	}
	if ok, _ := reply.Lookup("helloOk").BooleanOK(); !ok {
		t.Errorf("isMaster reply %s has no helloOk", reply)
	}
	wrapped := query("admin.$cmd", bson.D{
		{Key: "$query", Value: bson.D{{Key: "ismaster", Value: 1}}},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primaryPreferred"}}},
	})
	checkOK(t, wrapped)
	checkError(t, query("admin.$cmd", bson.D{{Key: "ping", Value: 1}}), 352, "UnsupportedOpQueryCommand")
	checkError(t, query("x.c", bson.D{{Key: "a", Value: 1}}), 352, "UnsupportedOpQueryCommand")
	checkOK(t, r.run(cmd("admin", bson.E{Key: "ping", Value: 1}))) // OP_MSG still works
	if st := srv.Stats(); st.OpQueries != 4 {
		t.Errorf("OpQueries = %d, want 4", st.OpQueries)
	}
}
