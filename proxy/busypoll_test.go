package proxy_test

import (
	"errors"
	"net"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
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
	client, err := mongopool.NewClient(rs.URI(), mongopool.WithBusyPoller(bp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	p, err := proxy.New(client, proxy.Config{BusyPoller: bp})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln, proxy.Mongos) }()
	t.Cleanup(func() { // after the driver's disconnection, a cleanup of later
		p.Close()
		if err := <-served; !errors.Is(err, proxy.ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})

	ctx := testContext(t)
	coll := driverClient(t, "mongodb://"+ln.Addr().String()+"/").Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	const finds = 20
	for range finds {
		var doc struct{ X string }
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.X != "a" {
			t.Fatalf("find: %+v, %v", doc, err)
		}
	}
	st := p.Stats()
	clientPolls, _ := bp.Stats()
	// Each find: its upstream reply polled for, and the next request
	// after its reply (the driver sends them back to back); most within
	// the millisecond.
	if st.BusyPolls < finds+finds/2 || st.BusyPollHits < 1 || st.BusyPolls != clientPolls {
		t.Errorf("Stats: %d busy polls, %d hits (the poller's own count %d) after %d finds; want %d polls or more, and hits",
			st.BusyPolls, st.BusyPollHits, clientPolls, finds, finds+finds/2)
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
