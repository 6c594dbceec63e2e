package mongopool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// A client of a three-member replica set: it discovers the set from its
// URI, writes on the primary and reads on a secondary; a step-down and an
// election in between cost no failed operation.
func ExampleConnect() {
	rs, err := mongotest.StartReplicaSet("rs0", 3)
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := mongopool.Connect(ctx, rs.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	insert := func(id int) error {
		_, err := c.Write(ctx, "shop", bson.D{{Key: "insert", Value: "orders"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}})
		return err
	}
	if err := insert(1); err != nil {
		panic(err)
	}
	if err := rs.StepDown(ctx); err != nil {
		panic(err)
	}
	if err := rs.Elect(2); err != nil {
		panic(err)
	}
	if err := insert(2); err != nil { // waits for the new primary
		panic(err)
	}
	reply, err := c.Read(ctx, "shop", bson.D{{Key: "count", Value: "orders"}},
		mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondary}))
	if err != nil {
		panic(err)
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	d := c.Topology().Description()
	fmt.Println(d.Type, d.SetName, "documents:", n)
	// Output: ReplicaSetWithPrimary rs0 documents: 2
}

// Several commands on one connection: a Conn keeps it until Close.
func ExampleClient_Conn() {
	srv, err := mongotest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, srv.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	conn, err := c.Conn(ctx)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	var ids []int64
	for range 2 {
		reply, err := conn.RunCommand(ctx, "admin", bson.D{{Key: "hello", Value: 1}})
		if err != nil {
			panic(err)
		}
		id, _ := reply.Lookup("connectionId").AsInt64OK()
		ids = append(ids, id)
	}
	fmt.Println("one connection:", ids[0] == ids[1])
	// Output: one connection: true
}

// Conn.Do relays a message as it came (a proxy's request, with its
// document sequences) over the one connection the Conn holds: a cursor's
// getMores follow its find there, as behind a load balancer they must.
func ExampleConn_Do() {
	srv, err := mongotest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, srv.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}}); err != nil {
		panic(err)
	}

	conn, err := c.Conn(ctx)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	relay := func(cmd bson.D) bson.Raw {
		body, err := bson.Marshal(cmd)
		if err != nil {
			panic(err)
		}
		var reply bson.Raw
		if err := conn.Do(ctx, func(cn *connection.Conn) error {
			reply, err = cn.RoundTripMsg(ctx, body, nil)
			return err
		}); err != nil {
			panic(err)
		}
		return reply
	}
	reply := relay(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "db"}})
	id := reply.Lookup("cursor", "id").Int64()
	reply = relay(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "$db", Value: "db"}})
	fmt.Println("the getMore's document:", reply.Lookup("cursor", "nextBatch").Array().Index(0).Document().Lookup("_id").Int32())
	// Output: the getMore's document: 2
}

// A write some of whose statements fail: Write returns a *WriteErrors that
// names them, with the reply's count of what was done.
func ExampleWriteErrors() {
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, rs.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	doc := func(id int) bson.D { return bson.D{{Key: "_id", Value: id}} }
	_, err = c.Write(ctx, "shop", bson.D{{Key: "insert", Value: "orders"}, {Key: "ordered", Value: false},
		{Key: "documents", Value: bson.A{doc(1), doc(1), doc(2)}}})
	var we *mongopool.WriteErrors
	if errors.As(err, &we) {
		n, _ := we.Reply.Lookup("n").AsInt64OK()
		fmt.Println("inserted:", n)
		for _, e := range we.Errors {
			fmt.Println("statement", e.Index, "failed with code", e.Code)
		}
	}
	// Output:
	// inserted: 2
	// statement 1 failed with code 11000
}

// A find with its results in batches: the cursor's getMores go to the server
// that ran the find.
func ExampleClient_Cursor() {
	srv, err := mongotest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, srv.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	docs := bson.A{}
	for i := range 5 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "item", Value: fmt.Sprint("item ", i)}})
	}
	if _, err := c.Write(ctx, "shop", bson.D{{Key: "insert", Value: "orders"}, {Key: "documents", Value: docs}}); err != nil {
		panic(err)
	}

	cur, err := c.Cursor(ctx, "shop", bson.D{{Key: "find", Value: "orders"},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 2}}}}}, {Key: "batchSize", Value: 2}},
		mongopool.WithBatchSize(2))
	if err != nil {
		panic(err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		fmt.Println(cur.Current().Lookup("item").StringValue())
	}
	if err := cur.Err(); err != nil {
		panic(err)
	}
	// Output:
	// item 2
	// item 3
	// item 4
}

// Commands in one explicit session: they carry its lsid, and its writes are
// retryable writes numbered in order.
func ExampleClient_StartSession() {
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, rs.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	sess, err := c.StartSession()
	if err != nil {
		panic(err)
	}
	defer sess.EndSession(ctx)
	in := mongopool.WithSession(sess)
	for i := range 2 {
		if _, err := c.Write(ctx, "shop", bson.D{{Key: "insert", Value: "orders"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}}, in); err != nil {
			panic(err)
		}
	}
	reply, err := c.Read(ctx, "shop", bson.D{{Key: "count", Value: "orders"}}, in)
	if err != nil {
		panic(err)
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	fmt.Println("orders:", n, "session:", sess.ID() != nil)
	// Output: orders: 2 session: true
}

// A transfer between two accounts in a transaction: both updates commit
// together, or neither does. WithTransaction runs the function again if a
// transient error (a step-down, a write conflict) aborted the
// transaction, and sends the commit again if its result is unknown.
func ExampleSession_WithTransaction() {
	rs, err := mongotest.StartReplicaSet("rs0", 3)
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongopool.Connect(ctx, rs.URI())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	accounts := bson.A{bson.D{{Key: "_id", Value: "alice"}, {Key: "balance", Value: 100}},
		bson.D{{Key: "_id", Value: "bob"}, {Key: "balance", Value: 0}}}
	if _, err := c.Write(ctx, "bank", bson.D{{Key: "insert", Value: "accounts"}, {Key: "documents", Value: accounts}}); err != nil {
		panic(err)
	}

	s, err := c.StartSession()
	if err != nil {
		panic(err)
	}
	defer s.EndSession(ctx)
	move := func(id string, amount int) bson.D {
		return bson.D{{Key: "update", Value: "accounts"}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: id}}},
			{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: amount}}}}},
		}}}}
	}
	err = s.WithTransaction(ctx, func(ctx context.Context) error {
		if _, err := c.Write(ctx, "bank", move("alice", -30), mongopool.WithSession(s)); err != nil {
			return err
		}
		_, err := c.Write(ctx, "bank", move("bob", 30), mongopool.WithSession(s))
		return err
	}, &mongopool.TransactionOptions{WriteConcern: bson.D{{Key: "w", Value: "majority"}}})
	if err != nil {
		panic(err)
	}
	cur, err := c.Cursor(ctx, "bank", bson.D{{Key: "find", Value: "accounts"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}})
	if err != nil {
		panic(err)
	}
	for cur.Next(ctx) {
		fmt.Println(cur.Current().Lookup("_id").StringValue(), cur.Current().Lookup("balance").Int32())
	}
	// Output:
	// alice 70
	// bob 30
}

// Clients of two credentials that share one topology: one monitor per
// server, and a pool per server for each credential.
func ExampleWithSharedTopology() {
	rs, err := mongotest.StartReplicaSet("rs0", 2)
	if err != nil {
		panic(err)
	}
	defer rs.Close()
	for _, user := range []string{"orders", "reports"} {
		if err := rs.Primary().AddUser("admin", user, user+"-secret"); err != nil {
			panic(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uri := func(user string) string {
		return "mongodb://" + user + ":" + user + "-secret@" + rs.Primary().Addr() + "/?replicaSet=rs0"
	}
	orders, err := mongopool.Connect(ctx, uri("orders"))
	if err != nil {
		panic(err)
	}
	defer orders.Close()
	reports, err := mongopool.Connect(ctx, uri("reports"), mongopool.WithSharedTopology(orders))
	if err != nil {
		panic(err)
	}
	defer reports.Close()

	for _, c := range []*mongopool.Client{orders, reports} {
		reply, err := c.Read(ctx, "admin", bson.D{{Key: "connectionStatus", Value: 1}},
			mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondary}))
		if err != nil {
			panic(err)
		}
		user := reply.Lookup("authInfo", "authenticatedUsers", "0", "user").StringValue()
		fmt.Println(user, "pools:", len(c.Pools()), "same topology:", c.Topology() == orders.Topology())
	}
	// Output:
	// orders pools: 2 same topology: true
	// reports pools: 2 same topology: true
}
