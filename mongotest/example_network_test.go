package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"syscall"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A Network carries a test's connections in memory: the members of a
// replica set listen on it, at addresses that look like TCP's, and a
// client dials them through it (here the official driver, whose SetDialer
// takes the Network; mongopool.WithDialer takes n.DialContext). Inside a
// testing/synctest bubble, the client's heartbeats, timeouts and the
// members' awaitable hellos then run on the bubble's clock.
func ExampleNetwork() {
	n := mongotest.NewNetwork()
	defer n.Close() // closes the replica set and every connection
	rs, err := mongotest.StartReplicaSet("rs0", 3, mongotest.WithNetwork(n))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rs.URI())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(rs.URI() + "&heartbeatFrequencyMS=500").SetDialer(n))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("test").Collection("people")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Ada"}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rs.Primary().Stats().Commands["insert"], "insert on", rs.Primary().Addr())

	// Nobody listens on the next port: the dial is refused at once.
	_, err = n.DialContext(ctx, "tcp", "127.0.0.1:27020")
	fmt.Println(errors.Is(err, syscall.ECONNREFUSED))
	// Output:
	// mongodb://127.0.0.1:27017,127.0.0.1:27018,127.0.0.1:27019/?replicaSet=rs0
	// 1 insert on 127.0.0.1:27017
	// true
}
