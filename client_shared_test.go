package mongopool_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// authenticatedAs returns the user the server says c's connection of the
// primary is authenticated as.
func authenticatedAs(t *testing.T, c *mongopool.Client) string {
	t.Helper()
	reply, err := c.RunCommand(ctx(t), "admin", bson.D{{Key: "connectionStatus", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	user, _ := reply.Lookup("authInfo", "authenticatedUsers", "0", "user").StringValueOK()
	return user
}

// Clients of two credentials share one topology: each authenticates its own
// connections, in pools of its own, and selection serves both. A credential
// the server refuses fails its client's operations and leaves the topology,
// and the other clients, as they were. Closing a client that shares the
// topology closes its pools only; closing the topology's client ends them
// all.
func TestSharedTopology(t *testing.T) {
	rs := startReplicaSet(t, 2)
	primary := rs.Primary()
	for _, u := range []string{"alice", "bob"} {
		if err := primary.AddUser("admin", u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	var events topologyEvents
	base := newClient(t, "mongodb://alice:alice-pw@"+primary.Addr()+"/?replicaSet=rs",
		mongopool.WithTopologyEventHandler(events.handler))
	bob := newClient(t, "mongodb://bob:bob-pw@"+primary.Addr()+"/?replicaSet=rs&appName=bob",
		mongopool.WithSharedTopology(base))
	if bob.Topology() != base.Topology() {
		t.Fatal("the client has a topology of its own")
	}
	if got := authenticatedAs(t, base); got != "alice" {
		t.Errorf("the base client's connection is %q's", got)
	}
	if got := authenticatedAs(t, bob); got != "bob" {
		t.Errorf("the sharing client's connection is %q's", got)
	}
	secondary := mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondary})
	for _, c := range []*mongopool.Client{base, bob} {
		if _, err := c.Read(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}}, secondary); err != nil {
			t.Fatal(err)
		}
	}
	if nb, nbob := len(base.Pools()), len(bob.Pools()); nb != 2 || nbob != 2 {
		t.Fatalf("pools: %d and %d, want a pool per member each", nb, nbob)
	}
	for _, p := range bob.Pools() {
		if slices.Contains(base.Pools(), p) {
			t.Errorf("the clients share the pool of %s", p.Address())
		}
	}

	// A refused credential: its client's operations fail with the
	// server's error; the topology's servers stay as they are.
	if err := base.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	before := len(events.names())
	eve := newClient(t, "mongodb://bob:wrong@"+primary.Addr()+"/?replicaSet=rs", mongopool.WithSharedTopology(base))
	_, err := eve.RunCommand(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}})
	var ce *pool.ConnectionError
	var cmd *wire.CommandError
	if !errors.As(err, &ce) || !ce.DuringAuth || !errors.As(err, &cmd) || cmd.Code != 18 {
		t.Fatalf("a refused credential: %v", err)
	}
	if got := authenticatedAs(t, bob); got != "bob" {
		t.Errorf("after another's refused credential, bob's connection is %q's", got)
	}
	if err := base.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.names()[before:] {
		if strings.Contains(e, "Unknown") {
			t.Errorf("a refused credential of a sharing client changed the topology: %s", e)
		}
	}
	for _, p := range base.Pools() {
		if st := p.Stats().State; st != "ready" {
			t.Errorf("the base client's pool of %s is %s", p.Address(), st)
		}
	}

	// Closing a sharing client closes its pools, and only those.
	if err := eve.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range bob.Pools() {
		t.Errorf("bob's pool of %s is still open after bob's Close", p.Address())
	}
	if _, err := base.RunCommand(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatalf("the base client after bob's Close: %v", err)
	}

	// Closing the base client closes the topology under the others.
	carol := newClient(t, "mongodb://bob:bob-pw@"+primary.Addr()+"/?replicaSet=rs", mongopool.WithSharedTopology(base))
	if err := base.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.RunCommand(ctx(t), "admin", bson.D{{Key: "ping", Value: 1}}); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("a sharing client after the base client's Close: %v", err)
	}
	if len(carol.Pools()) != 0 {
		t.Error("the sharing client's pools outlived the topology")
	}
	if _, err := mongopool.NewClient("mongodb://bob:bob-pw@"+primary.Addr()+"/?replicaSet=rs", mongopool.WithSharedTopology(base)); err == nil ||
		!strings.Contains(err.Error(), "closed") {
		t.Errorf("sharing a closed client's topology: %v", err)
	}
}

// A connection string that names another deployment, or sets the
// topology's options otherwise, is refused with what differs.
func TestSharedTopologyRefusesAnotherDeployment(t *testing.T) {
	base := newClient(t, "mongodb://a.example:27017,b.example:27017/?replicaSet=rs&heartbeatFrequencyMS=5000")
	for _, c := range []struct{ uri, want string }{
		{"mongodb://a.example:27017/?replicaSet=rs", "the hosts differ"},
		{"mongodb://b.example:27017,a.example:27017/?replicaSet=other", "replicaSet differs"},
		{"mongodb://b.example:27017,a.example:27017/?replicaSet=rs&heartbeatFrequencyMS=10000", "heartbeatFrequencyMS differs"},
		{"mongodb://b.example:27017,a.example:27017/?replicaSet=rs&serverSelectionTimeoutMS=1000", "serverSelectionTimeoutMS differs"},
		{"mongodb://b.example:27017,a.example:27017/?replicaSet=rs&serverMonitoringMode=poll", "serverMonitoringMode differs"},
		{"mongodb://b.example:27017,a.example:27017/?replicaSet=rs&directConnection=false&loadBalanced=false", ""},
	} {
		c2, err := mongopool.NewClient(c.uri, mongopool.WithSharedTopology(base))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.uri, err)
			} else {
				c2.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.uri, err, c.want)
		}
		if c2 != nil {
			c2.Close()
		}
	}
	if _, err := mongopool.NewClient("mongodb://a.example:27017,b.example:27017/?replicaSet=rs", mongopool.WithSharedTopology(base),
		mongopool.WithTopologyEventHandler(func(topology.Event) {})); err == nil || !strings.Contains(err.Error(), "WithTopologyEventHandler") {
		t.Errorf("a topology event handler: %v", err)
	}
}

// Behind a load balancer, a sharing client's cursor is pinned to a
// connection of its own pool, which serves its getMores; the base client's
// pool lends none.
func TestSharedTopologyLoadBalanced(t *testing.T) {
	s := server(t, mongotest.WithLoadBalanced(bson.NewObjectID()))
	for _, u := range []string{"alice", "bob"} {
		if err := s.AddUser("admin", u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	base := newClient(t, "mongodb://alice:alice-pw@"+s.Addr()+"/?loadBalanced=true")
	bob := newClient(t, "mongodb://bob:bob-pw@"+s.Addr()+"/?loadBalanced=true", mongopool.WithSharedTopology(base))
	docs := bson.A{}
	for i := range 5 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := bob.Write(ctx(t), "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}); err != nil {
		t.Fatal(err)
	}
	cur, err := bob.Cursor(ctx(t), "db", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}}, mongopool.WithBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx(t))
	n := 0
	for cur.Next(ctx(t)) {
		n++
		if n == 1 {
			bp, basePools := bob.Pools(), base.Pools()
			if len(bp) != 1 || bp[0].Stats().InUse != 1 || len(basePools) != 1 || basePools[0].Stats().InUse != 0 {
				t.Fatalf("while the cursor is open: bob's pools %d (in use %d), the base's %d (in use %d)",
					len(bp), bp[0].Stats().InUse, len(basePools), basePools[0].Stats().InUse)
			}
		}
	}
	if err := cur.Err(); err != nil || n != 5 {
		t.Fatalf("the cursor gave %d documents: %v", n, err)
	}
	if got := authenticatedAs(t, bob); got != "bob" {
		t.Errorf("bob's connection is %q's", got)
	}
}
