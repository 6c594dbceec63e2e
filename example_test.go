package mongopool_test

import (
	"context"
	"fmt"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
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
