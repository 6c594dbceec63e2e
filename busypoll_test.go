package mongopool_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
)

// A client's pools poll with the BusyPoller given: with commands one at a
// time, every command polls once for its reply.
func TestWithBusyPoller(t *testing.T) {
	bp := connection.NewBusyPoller(connection.MaxBusyPoll)
	if bp.Budget() == 0 {
		t.Skip("this machine does not poll (one CPU, or not Linux)")
	}
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, srv.URI()+"?heartbeatFrequencyMS=500", mongopool.WithBusyPoller(bp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err) // the pool's first connection: its handshake polls too
	}
	const commands = 10
	before, _ := bp.Stats()
	for range commands {
		if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if polls, _ := bp.Stats(); polls-before != commands {
		t.Errorf("%d commands polled %d times, want once each", commands, polls-before)
	}
}
