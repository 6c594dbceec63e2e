package mongotest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A test starts a server, connects a client to it, and checks afterwards
// what the server saw.
func Example() {
	srv, err := mongotest.Start(mongotest.WithCompressors("zstd"))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.AddUser("admin", "alice", "pencil"); err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uri := "mongodb://alice:pencil@" + srv.Addr() + "/?compressors=zstd"
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)

	coll := client.Database("test").Collection("people")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Ada"}}); err != nil {
		log.Fatal(err)
	}
	var person struct{ Name string }
	if err := coll.FindOne(ctx, bson.D{{Key: "name", Value: "Ada"}}).Decode(&person); err != nil {
		log.Fatal(err)
	}
	st := srv.Stats()
	fmt.Println(person.Name, st.Authentications["SCRAM-SHA-256"] > 0, st.CompressedReceived["zstd"] > 0)
	// Output: Ada true true
}
