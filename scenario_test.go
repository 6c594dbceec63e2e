package mongopool_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// startReplicaSet starts an in-process replica set closed at the end of the
// test.
func startReplicaSet(t *testing.T, members int, opts ...mongotest.Option) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs", members, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// waitTopology waits until cond holds of the client's topology.
func waitTopology(t *testing.T, c *mongopool.Client, what string, cond func(topology.Description) bool) {
	t.Helper()
	waitFor(t, func() string {
		return what + "; topology: " + c.Topology().Description().Summary()
	}, func() bool { return cond(c.Topology().Description()) })
}

func hasTypes(want map[topology.ServerType]int) func(topology.Description) bool {
	return func(d topology.Description) bool {
		got := map[topology.ServerType]int{}
		for _, sd := range d.Servers() {
			got[sd.Type]++
		}
		for k, n := range want {
			if got[k] != n {
				return false
			}
		}
		return true
	}
}

// The client discovers a three-member replica set from one seed, sends
// writes to the primary and reads by read preference.
func TestReplicaSetDiscoveryAndReadPreference(t *testing.T) {
	rs := startReplicaSet(t, 3)
	seed := rs.Members()[1].Addr()
	c := newClient(t, "mongodb://"+seed+"/?replicaSet=rs")
	waitTopology(t, c, "a primary and two secondaries", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 2}))
	ctx := ctx(t)
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	primary := rs.Primary()
	if n := primary.Stats().Commands["insert"]; n != 1 {
		t.Errorf("the primary saw %d inserts", n)
	}
	secondary := topology.ReadPref{Mode: topology.ModeSecondary}
	for range 20 {
		if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithReadPreference(secondary)); err != nil {
			t.Fatal(err)
		}
	}
	if n := primary.Stats().Commands["count"]; n != 0 {
		t.Errorf("reads with mode secondary reached the primary %d times", n)
	}
	var onSecondaries int64
	for _, m := range rs.Members() {
		if m != primary {
			onSecondaries += m.Stats().Commands["count"]
		}
	}
	if onSecondaries != 20 {
		t.Errorf("the secondaries saw %d reads, want 20", onSecondaries)
	}
}

// Failover under load: 32 goroutines of retryable writes and reads while the
// primary steps down and another member is elected. Every operation
// succeeds (retried once where needed), and the new primary takes writes
// soon after the election: with the streaming protocol the client hears of
// it at once, not after a heartbeat.
func TestFailoverUnderLoad(t *testing.T) {
	rs := startReplicaSet(t, 3)
	c := newClient(t, rs.URI())
	waitTopology(t, c, "a primary", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1}))
	ctx := ctx(t)

	var (
		ops, failures atomic.Int64
		firstErr      atomic.Pointer[error]
		stop          = make(chan struct{})
		wg            sync.WaitGroup
		nextID        atomic.Int64
	)
	var elected atomic.Pointer[time.Time]
	var firstAck atomic.Pointer[time.Time]
	oldPrimary := rs.Primary()
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if g%2 == 0 {
					id := nextID.Add(1)
					_, err = c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}})
					if err == nil && elected.Load() != nil && firstAck.Load() == nil {
						now := time.Now()
						firstAck.CompareAndSwap(nil, &now)
					}
				} else {
					_, err = c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModePrimaryPreferred}))
				}
				ops.Add(1)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	waitOps := func(n int64) {
		start := ops.Load()
		waitFor(t, func() string { return fmt.Sprintf("the load to go on: it stalled at %d operations", ops.Load()) },
			func() bool { return ops.Load() >= start+n })
	}
	waitOps(200)
	if err := rs.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	next := 0
	for i, m := range rs.Members() {
		if m != oldPrimary {
			next = i
			break
		}
	}
	if err := rs.Elect(next); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	elected.Store(&now)
	waitOps(200)
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d operations failed; the first: %v", n, ops.Load(), *firstErr.Load())
	}
	ack := firstAck.Load()
	if ack == nil {
		t.Fatal("no write was acknowledged after the election")
	}
	t.Logf("%d operations, none failed; first write acknowledged %v after the election", ops.Load(), ack.Sub(now))
	if rs.Members()[next].Stats().Commands["insert"] == 0 {
		t.Error("the new primary took no write")
	}
}

// A member killed mid-load: its pool is cleared, reads go on on the others,
// and when it comes back its pool becomes ready again by itself.
func TestMemberKilledAndRestarted(t *testing.T) {
	rs := startReplicaSet(t, 3)
	log := newE2EEventLog()
	c := newClient(t, rs.URI()+"&heartbeatFrequencyMS=500", mongopool.WithPoolOptions(pool.WithEventHandler(log.handler)))
	log.attach(c)
	waitTopology(t, c, "two secondaries", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 2}))
	ctx := ctx(t)
	victim := -1
	for i, m := range rs.Members() {
		if m != rs.Primary() {
			victim = i
			break
		}
	}
	addr := rs.Members()[victim].Addr()
	nearest := mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondaryPreferred})
	for range 50 {
		if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, nearest); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Stop(victim); err != nil {
		t.Fatal(err)
	}
	log.waitFor(ctx, t, "the killed member's pool cleared", func(e pool.Event) bool { return e.Type == pool.PoolCleared && e.Address == addr })
	for i := range 50 {
		if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}, nearest); err != nil {
			t.Fatalf("read %d after the kill: %v", i, err)
		}
	}
	if err := rs.Restart(victim); err != nil {
		t.Fatal(err)
	}
	log.waitFor(ctx, t, "the member's pool ready again", func(e pool.Event) bool { return e.Type == pool.PoolReady && e.Address == addr })
	waitTopology(t, c, "the member back as a secondary", func(d topology.Description) bool {
		sd, ok := d.Server(addr)
		return ok && sd.Type == topology.RSSecondary
	})
}

// A secondary partitioned away is excluded from selection once its check
// times out, and no operation waits on it.
func TestPartitionedSecondaryIsExcluded(t *testing.T) {
	rs := startReplicaSet(t, 3)
	c := newClient(t, rs.URI()+"&heartbeatFrequencyMS=500&connectTimeoutMS=300")
	waitTopology(t, c, "two secondaries", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 2}))
	ctx := ctx(t)
	victim := -1
	for i, m := range rs.Members() {
		if m != rs.Primary() {
			victim = i
			break
		}
	}
	addr := rs.Members()[victim].Addr()
	if err := rs.Partition(victim); err != nil {
		t.Fatal(err)
	}
	waitTopology(t, c, "the partitioned member Unknown", func(d topology.Description) bool {
		sd, ok := d.Server(addr)
		return ok && sd.Type == topology.ServerUnknown
	})
	before := rs.Members()[victim].Stats().Commands["count"]
	secondary := mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondary})
	for i := range 50 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Read(rctx, "db", bson.D{{Key: "count", Value: "c"}}, secondary)
		cancel()
		if err != nil {
			t.Fatalf("read %d with a secondary partitioned: %v", i, err)
		}
	}
	if n := rs.Members()[victim].Stats().Commands["count"] - before; n != 0 {
		t.Errorf("the partitioned member got %d reads", n)
	}
	if err := rs.Heal(victim); err != nil {
		t.Fatal(err)
	}
	waitTopology(t, c, "the member back", func(d topology.Description) bool {
		sd, ok := d.Server(addr)
		return ok && sd.Type == topology.RSSecondary
	})
}
