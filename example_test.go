package mongopool_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
)

func ExampleOpen() {
	srv, err := mongotest.Start() // stands for a MongoDB server
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	p, err := mongopool.Open(ctx, srv.URI()+"?maxPoolSize=10&appName=example")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	reply, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ok:", reply.Lookup("ok").Double())
	fmt.Println("connections:", p.Stats().Total)
	// Output:
	// ok: 1
	// connections: 1
}

// New builds the pool without connecting: the first command makes the first
// connection. A handshake that fails during authentication (an error without
// the SystemOverloadedError label) clears and pauses the pool until the server
// answers again; a check-out that meets the paused pool fails with an error
// labelled RetryableError.
func ExampleNew() {
	srv, err := mongotest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.AddUser("admin", "alice", "pencil"); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	p, err := mongopool.New("mongodb://alice:pencil@" + srv.Addr() + "/?appName=example")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	fmt.Println("connections after New:", p.Stats().Total)

	// The next authentication of this application meets a network error.
	err = srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"saslContinue"}, AppName: "example", CloseConnection: true, Times: 1})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	fmt.Println("first command failed:", err != nil)
	// The error marked the server Unknown and paused its pool; the next
	// command waits for the monitor to find the server again.
	fmt.Println("pool:", p.Stats().State)
	_, err = p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	fmt.Println("second command:", err)
	// Output:
	// connections after New: 0
	// first command failed: true
	// pool: paused
	// second command: <nil>
}

// A process that relays requests and waits for their replies, a proxy say,
// shares one BusyPoller between its clients: at low load their
// connections poll for a prompt reply rather than sleep until it comes.
func ExampleWithBusyPoller() {
	srv, err := mongotest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	bp := connection.NewBusyPoller(50 * time.Microsecond)
	c, err := mongopool.Connect(ctx, srv.URI(), mongopool.WithBusyPoller(bp))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reply, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ok:", reply.Lookup("ok").Double())
	// Output:
	// ok: 1
}
