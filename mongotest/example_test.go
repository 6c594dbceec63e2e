package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
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

// A fail point makes the server fail commands as MongoDB's failCommand does:
// here the next two finds fail with a code and a label, and the third runs.
func ExampleServer_SetFailPoint() {
	srv, err := mongotest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	err = srv.SetFailPoint(mongotest.FailPoint{
		Commands:    []string{"find"},
		Times:       2,
		ErrorCode:   50, // MaxTimeMSExpired
		ErrorLabels: []string{"RetryableError"},
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetRetryReads(false))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("test").Collection("c")
	for range 3 {
		err := coll.FindOne(ctx, bson.D{}).Err()
		var se mongo.ServerError
		if errors.As(err, &se) {
			fmt.Println("code 50:", se.HasErrorCode(50), "labelled:", se.HasErrorLabel("RetryableError"))
		} else {
			fmt.Println(err) // the fail point is used up: the find runs
		}
	}
	// Output:
	// code 50: true labelled: true
	// code 50: true labelled: true
	// mongo: no documents in result
}

// A fault breaks the protocol in ways no fail point can: here the reply to a
// ping answers another request, which the client refuses; the pool closes
// that connection, and the next ping goes through a new one.
func ExampleServer_InjectFault() {
	srv, err := mongotest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ready := make(chan struct{}, 4)
	p, err := mongopool.Open(ctx, srv.URI(), pool.WithEventHandler(func(e pool.Event) {
		if e.Type == pool.PoolReady {
			ready <- struct{}{}
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	<-ready // Open's

	remove, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultWrongResponseTo, Commands: []string{"ping"}, Times: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer remove()
	ping := bson.D{{Key: "ping", Value: 1}}
	_, err = p.RunCommand(ctx, "admin", ping)
	fmt.Println("protocol error:", errors.Is(err, wire.ErrProtocol))
	// The broken reply marked the server Unknown and cleared the pool: the
	// next command waits for the monitor to find the server again, then
	// runs on a new connection.
	_, err = p.RunCommand(ctx, "admin", ping)
	fmt.Println("second ping:", err)
	select {
	case <-ready: // the check that found the server answering readied the pool
	case <-ctx.Done():
		log.Fatal(ctx.Err())
	}
	fmt.Println("connections created:", p.Stats().Created)
	// Output:
	// protocol error: true
	// second ping: <nil>
	// connections created: 2
}

// As the primary of a replica set, the server takes retryable writes and
// labels their retriable errors as mongod does, so the driver retries the
// insert that the fail point fails once.
func ExampleWithReplicaSet() {
	srv, err := mongotest.Start(mongotest.WithReplicaSet("rs0"))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	err = srv.SetFailPoint(mongotest.FailPoint{
		Commands:  []string{"insert"},
		Times:     1,
		ErrorCode: 262, // ExceededTimeLimit: the server adds RetryableWriteError
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The driver monitors a replica set member with awaitable hellos,
	// which wait up to heartbeatFrequencyMS: a short one keeps Disconnect
	// short.
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI() + "?heartbeatFrequencyMS=500"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("test").Collection("people")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Ada"}}); err != nil {
		log.Fatal(err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(srv.Stats().Commands["insert"], "inserts,", n, "document")
	// Output: 2 inserts, 1 document
}
