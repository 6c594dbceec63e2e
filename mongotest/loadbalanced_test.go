package mongotest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDriverLoadBalanced runs the official driver in load-balanced mode
// against a load-balanced server: the driver requires the serviceId in the
// handshake, sends hello (not legacy hello), and pins cursors to a
// connection.
func TestDriverLoadBalanced(t *testing.T) {
	id := bson.NewObjectID()
	srv := start(t, mongotest.WithLoadBalanced(id))
	if srv.ServiceID() != id {
		t.Fatalf("ServiceID = %v, want %v", srv.ServiceID(), id)
	}
	client := connect(t, srv.URI()+"?loadBalanced=true")
	c := ctx(t)
	if err := client.Ping(c, nil); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	coll := client.Database("x").Collection("c")
	for i := range 5 {
		if _, err := coll.InsertOne(c, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatalf("InsertOne: %v", err)
		}
	}
	cur, err := coll.Find(c, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	var docs []bson.M
	if err := cur.All(c, &docs); err != nil || len(docs) != 5 {
		t.Fatalf("Find returned %d documents, %v", len(docs), err)
	}
	var hello bson.M
	if err := client.Database("admin").RunCommand(c, bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello["serviceId"] != id || hello["msg"] != "isdbgrid" {
		t.Errorf("hello = %v, want serviceId %v and msg isdbgrid", hello, id)
	}
	st := srv.Stats()
	if st.OpQueries != 0 || st.Commands["isMaster"] != 0 || st.Commands["hello"] == 0 {
		t.Errorf("load-balanced handshake: %d OP_QUERY, commands %v; want hello in OP_MSG only", st.OpQueries, st.Commands)
	}
}

// TestDriverLoadBalancedMismatch checks both mismatches: a driver not in
// load-balanced mode cannot use a load-balanced server (its handshake
// fails), and a driver in load-balanced mode refuses a server that is not.
func TestDriverLoadBalancedMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []mongotest.Option
		query string
		want  string
	}{
		{"driver not load-balanced", []mongotest.Option{mongotest.WithLoadBalanced(bson.ObjectID{})}, "", "(LoadBalancerSupportMismatch)"},
		{"server not load-balanced", nil, "?loadBalanced=true", "the server does not support this mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, tc.opts...)
			client := connectWith(t, options.Client().ApplyURI(srv.URI()+tc.query).SetServerSelectionTimeout(300*time.Millisecond))
			if err := client.Ping(ctx(t), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ping: %v; want an error with %q", err, tc.want)
			}
		})
	}
}
