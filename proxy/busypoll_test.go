package proxy_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/proxy"
)

// One client's operations, one at a time, are polled for on both sides of
// the hop when the proxy and its client share a BusyPoller, and answered
// as without it.
func TestBusyPollingOneClient(t *testing.T) {
	bp := connection.NewBusyPoller(connection.MaxBusyPoll)
	if bp.Budget() == 0 {
		t.Skip("this machine does not poll (one CPU, or not Linux)")
	}
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{BusyPoller: bp})
	ctx := testContext(t)
	coll := driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	const finds = 40
	for range finds {
		var doc struct{ X string }
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.X != "a" {
			t.Fatalf("find: %+v, %v", doc, err)
		}
	}
	st := p.Stats()
	// Each find: its upstream reply polled for, and the next request
	// after its reply when the driver sent it within the budget of the
	// reply before (a loaded machine may make some late); most polls see
	// their socket readable within the millisecond.
	if st.BusyPolls < finds+8 || st.BusyPollHits < 1 {
		t.Errorf("Stats: %d busy polls, %d hits after %d finds; want %d polls or more, and hits",
			st.BusyPolls, st.BusyPollHits, finds, finds+8)
	}
	t.Logf("%d finds: %d busy polls, %d hits", finds, st.BusyPolls, st.BusyPollHits)
}

func TestNoBusyPollingByDefault(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	ctx := testContext(t)
	coll := driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c")
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.BusyPolls != 0 {
		t.Errorf("%d busy polls without a BusyPoller", st.BusyPolls)
	}
}
