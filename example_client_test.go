package mongopool_test

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
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
