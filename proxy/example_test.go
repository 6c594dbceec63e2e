package proxy_test

import (
	"context"
	"fmt"
	"net"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// A proxy in front of a replica set, embedded in a Go program: any driver
// connects to its listener as to a mongos.
func Example() {
	rs, err := mongotest.StartReplicaSet("rs0", 3) // a deployment to proxy
	if err != nil {
		panic(err)
	}
	defer rs.Close()

	client, err := mongopool.NewClient(rs.URI() + "&maxPoolSize=10")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	p, err := proxy.New(client, proxy.Config{})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go p.Serve(ln, proxy.Mongos)
	defer p.Close()

	// A driver nobody here wrote, as any application would use it.
	ctx := context.Background()
	app, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + ln.Addr().String() + "/"))
	if err != nil {
		panic(err)
	}
	defer app.Disconnect(ctx)
	var hello bson.M
	if err := app.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		panic(err)
	}
	fmt.Println("the driver sees:", hello["msg"])
	coll := app.Database("shop").Collection("orders")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "item", Value: "tea"}}); err != nil {
		panic(err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		panic(err)
	}
	fmt.Println("orders:", n)
	// Output:
	// the driver sees: isdbgrid
	// orders: 1
}
