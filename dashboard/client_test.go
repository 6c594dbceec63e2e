package dashboard_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// TestClientPools checks that a client's pools appear on the dashboard
// through its Pools method once the client has found their servers, with their
// events.
func TestClientPools(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d, hs := newDashboard(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	c, err := mongopool.Connect(ctx, srv.URI(), mongopool.WithPoolOptions(pool.WithEventHandler(d.EventHandler("cluster"))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := d.AddSource("cluster", c.Pools); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	name := "cluster/" + srv.Addr()
	waitSnapshot(t, hs, "the client's pool with its check-out", func(s *snapshotJSON) bool {
		p := s.pool(name)
		return p != nil && p.Address == srv.Addr() && p.Listening && p.Totals.CheckedOut >= 1 && p.EventCounts["ConnectionCheckedOut"] >= 1
	})
}
